"""Time-split sequential kernels: the warps of one program share each tile's rows.

The row walk (``kernels.forward_sequential_kernel``) gives a program one warp and walks a
chunk row by row; with one program per (batch row, channel block) that leaves ~2 warps per
SM on the reference shapes, each waiting on its own loads. Here a program of ``split`` warps
walks its sequence in tiles of TILE rows (whole chunks: TILE is a multiple of the chunk T),
each held as one [S, SEGMENTS * BLOCK_R] register tile of SEGMENTS segments of S
consecutive rows (``tiles.py``: a thread holds S consecutive rows of its columns, each warp
whole segments).

Forward, per tile: every thread loads its S rows (the whole tile's loads in flight at once,
and the next tile's issued before this one is computed), evaluates the gates, scans its
segment in registers (``tl.associative_scan`` along axis 0, inside the thread), and a scan
of the segment summaries, as [SEGMENTS, BLOCK_R] (shared memory), gives each segment the state
entering it; the rows' states are then h = A h_in + X from registers, and the states entering
the tile's chunks are its checkpoints (FUSED_WRITE). The backward is the same reversed: the
tile's states are recomputed from the checkpoint of its first chunk (the forward's own scan
of the same tile, so bit for bit the forward's states), then a reverse scan of
c_t = a_t (g_t + c_{t+1}) gives dL/dh_t = g_t + c_{t+1}, both exclusive prefixes taken from
a scan over (inclusive, exclusive) pairs, so that no value has to move between rows. Inputs
are read once per direction, gates evaluated once per element.

The per-element math is ``chunk.py``'s (:func:`chunk.load_row`, :func:`chunk.gates_of_row`,
:func:`chunk.output_of`, :func:`chunk.input_gradients`), applied to tiles instead of rows.
"""

import triton
import triton.language as tl

from samu_kernels.common.chunk import (
    GATES_PRECOMPUTED,
    OUT_Y_H_SKIP,
    accumulate_terms,
    gates_of_row,
    input_gradients,
    output_of,
    store_partials,
)
from samu_kernels.common.tiles import (
    load_backward_tile,
    load_forward_tile,
    program_constants,
    scan_tile,
    state_row,
    store_checkpoints,
    sum_segments,
    tile_mask,
    tile_offsets,
    tile_rows,
)


@triton.jit
def forward_split_kernel(
    U,
    GATE_X,
    GATE_A,
    Y,
    CHANNEL,
    SCALARS,
    RESET,
    H0,
    OUT,
    FINAL,
    SAVED,
    L,
    R: tl.constexpr,
    n_chunks,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    TILE: tl.constexpr,
    SEGMENTS: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_TILES: tl.constexpr,
    HAS_H0: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
):
    """Forward of one (batch row, channel block): its tiles of TILE rows (a multiple of the
    chunk T) in order, each cut into SEGMENTS segments scanned side by side by the program's
    threads (``launch.split_flags``); with FUSED_WRITE, the state entering every chunk goes
    to SAVED."""
    S: tl.constexpr = TILE // SEGMENTS
    n_tiles = tl.cdiv(L, TILE)
    (b, offs_r, col_mask, columns, column_mask, decay_scale, _a_param_factor, w_a, w_x, b_a, b_x,
     skip) = program_constants(tl.program_id(0), CHANNEL, SCALARS, R, BLOCK_R, SEGMENTS,
                               GATE_MODE, OUT_MODE)  # fmt: skip
    final_row, state_mask = state_row(FINAL, b, 0, offs_r, col_mask, R, 1)
    if HAS_H0:
        h0_row, _ = state_row(H0, b, 0, offs_r, col_mask, R, 1)
        h = tl.load(h0_row, mask=state_mask, other=0.0)
    else:
        h = tl.zeros([1, BLOCK_R], dtype=tl.float32)
    # Double-buffered: tile i + 1's loads are issued before tile i is computed (the last
    # iteration reloads the last tile instead of reading past the end).
    n_first, n_second, n_third, n_start, n_y, n_skip_u = load_forward_tile(
        U, GATE_X, GATE_A, Y, RESET, b, 0, columns, column_mask, L, R, TILE, S, SEGMENTS,
        BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    for tile in range(0, n_tiles):
        first, second, third, start, y, skip_u = n_first, n_second, n_third, n_start, n_y, n_skip_u
        n_first, n_second, n_third, n_start, n_y, n_skip_u = load_forward_tile(
            U, GATE_X, GATE_A, Y, RESET, b, tl.minimum(tile + 1, n_tiles - 1), columns,
            column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS,
            FULL_TILES,
        )  # fmt: skip
        mask = tile_mask(tile, column_mask, L, TILE, S, SEGMENTS, BLOCK_R, FULL_TILES)
        a, x, _log_a, _a2, _m, _gate_in, _gate_decay, u = gates_of_row(
            first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE,
            SHARED_SFU, HAS_RESETS,
        )  # fmt: skip
        states, states_before, h = scan_tile(a, x, h, S, SEGMENTS, BLOCK_R, False)
        rows = tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = tile_offsets(b, rows, columns, L, R)
        if FUSED_WRITE:
            store_checkpoints(SAVED, b, rows, states_before, columns, mask, R, n_chunks, T)
        else:
            tl.store(SAVED + offs, states, mask=mask)
        out = output_of(states, y, skip_u, u, skip, GATE_MODE, OUT_MODE)
        tl.store(OUT + offs, out.to(OUT.dtype.element_ty), mask=mask)
    tl.store(final_row, h, mask=state_mask)


@triton.jit
def backward_split_kernel(
    U,
    GATE_X,
    GATE_A,
    Y,
    CHANNEL,
    SCALARS,
    RESET,
    GRAD_OUT,
    GRAD_FINAL,
    SAVED,
    D_U,
    D_GATE_X,
    D_GATE_A,
    D_Y,
    D_H0,
    PARTIAL,
    L,
    R: tl.constexpr,
    n_chunks,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    TILE: tl.constexpr,
    SEGMENTS: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_TILES: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
):
    """Backward of one (batch row, channel block): its tiles from the last, segments as in
    the forward, the states recomputed from the checkpoint of the tile's first chunk
    (FUSED_WRITE); one row of PARTIAL per program (its batch row's, like
    ``backward_sequential_kernel``)."""
    S: tl.constexpr = TILE // SEGMENTS
    CHUNKS_PER_TILE: tl.constexpr = TILE // T
    n_tiles = tl.cdiv(L, TILE)
    (b, offs_r, col_mask, columns, column_mask, decay_scale, a_param_factor, w_a, w_x, b_a, b_x,
     skip) = program_constants(tl.program_id(0), CHANNEL, SCALARS, R, BLOCK_R, SEGMENTS,
                               GATE_MODE, OUT_MODE)  # fmt: skip
    final_row, state_mask = state_row(GRAD_FINAL, b, 0, offs_r, col_mask, R, 1)
    # c_t = a_t dL/dh_t, entering the last row from the final state's gradient.
    carry = tl.load(final_row, mask=state_mask, other=0.0)
    zero = tl.zeros([SEGMENTS * BLOCK_R], dtype=tl.float32)
    acc_decay = zero
    acc_wa = zero
    acc_wx = zero
    acc_ba = zero
    acc_bx = zero
    acc_logc = zero
    acc_skip = zero
    n_first, n_second, n_third, n_start, n_d_out, n_g, n_skip_u = load_backward_tile(
        U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, n_tiles - 1, columns, column_mask, L, R, TILE,
        S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    for i in range(0, n_tiles):
        tile = n_tiles - 1 - i
        first, second, third, start, d_out, g, skip_u = (
            n_first, n_second, n_third, n_start, n_d_out, n_g, n_skip_u
        )  # fmt: skip
        n_first, n_second, n_third, n_start, n_d_out, n_g, n_skip_u = load_backward_tile(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tl.maximum(tile - 1, 0), columns,
            column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS,
            FULL_TILES,
        )  # fmt: skip
        mask = tile_mask(tile, column_mask, L, TILE, S, SEGMENTS, BLOCK_R, FULL_TILES)
        offs = tile_offsets(b, tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R), columns, L, R)
        a, x, log_a, a2, m, gate_in, gate_decay, u = gates_of_row(
            first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE,
            SHARED_SFU, HAS_RESETS,
        )  # fmt: skip
        if FUSED_WRITE:
            checkpoint, _checkpoint_mask = state_row(
                SAVED, b, tile * CHUNKS_PER_TILE, offs_r, col_mask, R, n_chunks
            )
            h, _h_before, _h_leaving = scan_tile(
                a, x, tl.load(checkpoint, mask=state_mask, other=0.0), S, SEGMENTS, BLOCK_R, False
            )
        else:
            h = tl.load(SAVED + offs, mask=mask, other=0.0)
        if GATE_MODE == GATES_PRECOMPUTED and OUT_MODE == OUT_Y_H_SKIP:
            u = skip_u
        _c, c_next, carry = scan_tile(a, a * g, carry, S, SEGMENTS, BLOCK_R, True)
        terms = input_gradients(
            D_U, D_GATE_X, D_GATE_A, D_Y, offs, mask, start, h, x, g + c_next, d_out, g, a2, m,
            gate_in, gate_decay, u, log_a, decay_scale, w_a, w_x, skip, GATE_MODE, OUT_MODE,
            SHARED_SFU,
        )  # fmt: skip
        t_decay, t_wa, t_wx, t_ba, t_bx, t_logc, t_skip = terms
        # Each tile's terms summed over its rows first (inside the threads), in a fixed order.
        acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_logc, acc_skip = accumulate_terms(
            (acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_logc, acc_skip),
            (tl.sum(t_decay, 0), tl.sum(t_wa, 0), tl.sum(t_wx, 0), tl.sum(t_ba, 0),
             tl.sum(t_bx, 0), tl.sum(t_logc, 0), tl.sum(t_skip, 0)),
            GATE_MODE,
            OUT_MODE,
        )  # fmt: skip
    # dL/dh0 = a_0 dL/dh_0 = c_0.
    d_h0_row, _d_h0_mask = state_row(D_H0, b, 0, offs_r, col_mask, R, 1)
    tl.store(d_h0_row, carry, mask=state_mask)
    store_partials(
        PARTIAL, b, offs_r, col_mask, R, a_param_factor,
        sum_segments(acc_decay, SEGMENTS, BLOCK_R), sum_segments(acc_wa, SEGMENTS, BLOCK_R),
        sum_segments(acc_wx, SEGMENTS, BLOCK_R), sum_segments(acc_ba, SEGMENTS, BLOCK_R),
        sum_segments(acc_bx, SEGMENTS, BLOCK_R), sum_segments(acc_logc, SEGMENTS, BLOCK_R),
        sum_segments(acc_skip, SEGMENTS, BLOCK_R), GATE_MODE,
    )  # fmt: skip
