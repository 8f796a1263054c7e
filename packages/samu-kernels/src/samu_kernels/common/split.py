"""Time-split sequential kernels: the warps of one program share each tile's rows.

The row walk (``kernels.forward_sequential_kernel``) gives a program one warp and walks a
chunk row by row; with one program per (batch row, channel block) that leaves ~2 warps per
SM on the reference shapes, each waiting on its own loads. Here a program of ``split`` warps
walks its sequence in tiles of TILE rows (whole chunks: TILE is a multiple of the chunk T)
cut into SEGMENTS segments of S = TILE / SEGMENTS consecutive rows, each tile held as one
[S, SEGMENTS * BLOCK_R] register tile whose column w * BLOCK_R + c is channel c of segment
w (element (s, w * BLOCK_R + c) is row w * S + s). Only axis 1 is spread over threads (two
channels per thread, the most contiguous axis, so that Triton's coalescing puts it fastest
in every version), so a thread holds S consecutive rows of its columns and each warp whole
segments.

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
    channel_constants,
    gates_of_row,
    input_gradients,
    load_output_inputs,
    load_row,
    load_skip_input,
    output_grad,
    output_of,
    state_offsets,
    store_partials,
)
from samu_kernels.common.kernels import program_channels

COLUMNS_PER_THREAD: tl.constexpr = tl.constexpr(2)
"""Tile columns (pairs of adjacent channels) per thread: the contiguity the tiles' offsets
declare (:func:`_tile_offsets`), so that Triton's coalescing spreads the threads along axis 1
only; the launcher sizes SEGMENTS so that the program's threads cover the columns."""


@triton.jit
def compose_pairs(a1, x1, ea1, ex1, a2, x2, ea2, ex2):
    """Composition of (inclusive, exclusive) step pairs, first (a1, x1) then (a2, x2): the
    inclusive parts compose as h -> a h + x; the exclusive part of the whole is the first's
    inclusive part then the second's exclusive one (``ea1``/``ex1`` are not needed)."""
    return a1 * a2, a2 * x1 + x2, a1 * ea2, ea2 * x1 + ex2


@triton.jit
def _tile_rows(tile, TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr,
               BLOCK_R: tl.constexpr):  # fmt: skip
    """[S, SEGMENTS * BLOCK_R] int32 time steps of tile ``tile``: row w * S + s at (s, column
    w * BLOCK_R + c)."""
    s = tl.arange(0, S)[:, None]
    w = (tl.arange(0, SEGMENTS * BLOCK_R) // BLOCK_R)[None, :]
    return tile * TILE + w * S + s


@triton.jit
def _columns(x, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """A per-channel [BLOCK_R] vector repeated for every segment: [1, SEGMENTS * BLOCK_R]."""
    return tl.reshape(tl.broadcast_to(x[None, :], [SEGMENTS, BLOCK_R]), [1, SEGMENTS * BLOCK_R])


@triton.jit
def _sum_segments(x, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """Per-channel [BLOCK_R] sums of a [SEGMENTS * BLOCK_R] vector over its segments."""
    return tl.sum(tl.reshape(x, [SEGMENTS, BLOCK_R]), 0)


@triton.jit
def _pick(x, index, target: tl.constexpr, axis: tl.constexpr):
    """The slice of ``x`` at ``index == target`` along ``axis`` (a masked sum)."""
    return tl.sum(tl.where(index == target, x, 0.0), axis)


@triton.jit
def scan_tile(a, x, carry, S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
              REVERSE: tl.constexpr):  # fmt: skip
    """Scan h_t = a_t h_{t-1} + x_t over a [S, SEGMENTS * BLOCK_R] tile in time order
    (REVERSE: h_t = a_t h_{t+1} + x_t, from the last row), entering with ``carry``
    [1, BLOCK_R].

    Returns (inclusive, exclusive, leaving): the state after each row [S, SEGMENTS * BLOCK_R],
    the state before each row (the previous row's in scan order) and the state leaving the
    tile [1, BLOCK_R].
    """
    one = tl.full(a.shape, 1.0, tl.float32)
    zero = tl.zeros(a.shape, tl.float32)
    pa, px, ea, ex = tl.associative_scan((a, x, one, zero), 0, compose_pairs, reverse=REVERSE)
    s = tl.arange(0, S)[:, None]
    end: tl.constexpr = 0 if REVERSE else S - 1
    seg_a = tl.reshape(_pick(pa, s, end, 0), [SEGMENTS, BLOCK_R])
    seg_x = tl.reshape(_pick(px, s, end, 0), [SEGMENTS, BLOCK_R])
    ia, ix, wa, wx = tl.associative_scan(
        (seg_a, seg_x, tl.full(seg_a.shape, 1.0, tl.float32), tl.zeros(seg_a.shape, tl.float32)),
        0,
        compose_pairs,
        reverse=REVERSE,
    )
    entering = tl.reshape(wa * carry + wx, [1, SEGMENTS * BLOCK_R])
    w = tl.arange(0, SEGMENTS)[:, None]
    last_segment: tl.constexpr = 0 if REVERSE else SEGMENTS - 1
    leaving = _pick(ia * carry + ix, w, last_segment, 0)[None, :]
    return pa * entering + px, ea * entering + ex, leaving


@triton.jit
def _tile_offsets(b, rows, columns, L, R):
    """int64 element offsets [S, SEGMENTS * BLOCK_R] of a tile's rows in a [B, L, R] tensor
    (``columns``: each column's channel, [1, SEGMENTS * BLOCK_R]). Declared contiguous in
    COLUMNS_PER_THREAD columns only: Triton's coalescing then gives a thread that many
    channels (and all S rows) instead of eight channels of rows spread over threads and
    warps, which would put the scan's axis across them."""
    return tl.max_contiguous((b.to(tl.int64) * L + rows) * R + columns, [1, COLUMNS_PER_THREAD])


@triton.jit
def _load_tile_gates(
    U, GATE_X, GATE_A, RESET, b, tile, columns, column_mask, L, R, TILE: tl.constexpr,
    S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, GATE_MODE: tl.constexpr,
    HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
):  # fmt: skip
    """:func:`chunk.load_row` on a tile's [S, SEGMENTS * BLOCK_R] elements: (first, second,
    third, start, mask) and the tile's element offsets."""
    rows = _tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R)
    offs = _tile_offsets(b, rows, columns, L, R)
    first, second, third, start, mask = load_row(
        U, GATE_X, GATE_A, RESET, b, rows, offs, columns, column_mask, L, GATE_MODE, HAS_RESETS,
        FULL_TILES,
    )  # fmt: skip
    return first, second, third, start, mask, offs


@triton.jit
def _load_forward_tile(
    U, GATE_X, GATE_A, Y, RESET, b, tile, columns, column_mask, L, R, TILE: tl.constexpr,
    S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
):  # fmt: skip
    """The raw inputs of a tile: :func:`_load_tile_gates` and the output's inputs
    (:func:`chunk.load_output_inputs`)."""
    first, second, third, start, mask, offs = _load_tile_gates(
        U, GATE_X, GATE_A, RESET, b, tile, columns, column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R,
        GATE_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    y, skip_u = load_output_inputs(U, Y, offs, mask, first, GATE_MODE, OUT_MODE)
    return first, second, third, start, y, skip_u


@triton.jit
def _load_backward_tile(
    U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, columns, column_mask, L, R,
    TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr, HAS_RESETS: tl.constexpr,
    FULL_TILES: tl.constexpr,
):  # fmt: skip
    """:func:`_load_tile_gates` plus the output gradient of a tile (:func:`chunk.output_grad`)
    and the skip path's input."""
    first, second, third, start, mask, offs = _load_tile_gates(
        U, GATE_X, GATE_A, RESET, b, tile, columns, column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R,
        GATE_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    d_out, _y, g = output_grad(Y, GRAD_OUT, offs, mask, OUT_MODE)
    skip_u = load_skip_input(U, offs, mask, first, GATE_MODE, OUT_MODE)
    return first, second, third, start, d_out, g, skip_u


@triton.jit
def _tile_mask(tile, column_mask, L, TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr,
               BLOCK_R: tl.constexpr, FULL_TILES: tl.constexpr):  # fmt: skip
    """In-bounds elements of a tile (the mask :func:`chunk.load_row` used)."""
    rows = _tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R)
    mask = column_mask
    if not FULL_TILES:
        mask = mask & (rows < L)
    return mask


@triton.jit
def _state_row(STATE, b, chunk, offs_r, col_mask, R, n_rows):
    """Pointers and mask of one [1, BLOCK_R] row of a [B, n_rows, R] fp32 state tensor."""
    return STATE + state_offsets(b, chunk, offs_r, R, n_rows)[None, :], col_mask[None, :]


@triton.jit
def _program_constants(CHANNEL, SCALARS, R: tl.constexpr, BLOCK_R: tl.constexpr,
                       SEGMENTS: tl.constexpr, GATE_MODE: tl.constexpr,
                       OUT_MODE: tl.constexpr):  # fmt: skip
    """This program's (batch row, channels [BLOCK_R], their mask), the tile columns' channels
    and mask ([1, SEGMENTS * BLOCK_R]) and :func:`chunk.channel_constants`, the per-element
    ones (decay_scale, w_a, w_x) given per tile column."""
    b, offs_r, col_mask = program_channels(tl.program_id(0), R, BLOCK_R)
    decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    return (
        b, offs_r, col_mask, _columns(offs_r, SEGMENTS, BLOCK_R),
        _columns(col_mask, SEGMENTS, BLOCK_R), _columns(decay_scale, SEGMENTS, BLOCK_R),
        a_param_factor, _columns(w_a, SEGMENTS, BLOCK_R), _columns(w_x, SEGMENTS, BLOCK_R), b_a,
        b_x, skip,
    )  # fmt: skip


@triton.jit
def _store_checkpoints(SAVED, b, rows, states_before, columns, mask, R, n_chunks,
                       T: tl.constexpr):  # fmt: skip
    """Store the state entering each chunk that starts inside a tile (its rows at multiples
    of T) into SAVED [B, n_chunks, R]."""
    starts = mask & (rows % T == 0)
    offsets = state_offsets(b, rows // T, columns, R, n_chunks)
    tl.store(SAVED + offsets, states_before, mask=starts)


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
     skip) = _program_constants(CHANNEL, SCALARS, R, BLOCK_R, SEGMENTS, GATE_MODE,
                                OUT_MODE)  # fmt: skip
    final_row, state_mask = _state_row(FINAL, b, 0, offs_r, col_mask, R, 1)
    if HAS_H0:
        h0_row, _ = _state_row(H0, b, 0, offs_r, col_mask, R, 1)
        h = tl.load(h0_row, mask=state_mask, other=0.0)
    else:
        h = tl.zeros([1, BLOCK_R], dtype=tl.float32)
    # Double-buffered: tile i + 1's loads are issued before tile i is computed (the last
    # iteration reloads the last tile instead of reading past the end).
    n_first, n_second, n_third, n_start, n_y, n_skip_u = _load_forward_tile(
        U, GATE_X, GATE_A, Y, RESET, b, 0, columns, column_mask, L, R, TILE, S, SEGMENTS,
        BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    for tile in range(0, n_tiles):
        first, second, third, start, y, skip_u = n_first, n_second, n_third, n_start, n_y, n_skip_u
        n_first, n_second, n_third, n_start, n_y, n_skip_u = _load_forward_tile(
            U, GATE_X, GATE_A, Y, RESET, b, tl.minimum(tile + 1, n_tiles - 1), columns,
            column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS,
            FULL_TILES,
        )  # fmt: skip
        mask = _tile_mask(tile, column_mask, L, TILE, S, SEGMENTS, BLOCK_R, FULL_TILES)
        a, x, _log_a, _a2, _m, _gate_in, _gate_decay, u = gates_of_row(
            first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE,
            SHARED_SFU, HAS_RESETS,
        )  # fmt: skip
        states, states_before, h = scan_tile(a, x, h, S, SEGMENTS, BLOCK_R, False)
        rows = _tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = _tile_offsets(b, rows, columns, L, R)
        if FUSED_WRITE:
            _store_checkpoints(SAVED, b, rows, states_before, columns, mask, R, n_chunks, T)
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
     skip) = _program_constants(CHANNEL, SCALARS, R, BLOCK_R, SEGMENTS, GATE_MODE,
                                OUT_MODE)  # fmt: skip
    final_row, state_mask = _state_row(GRAD_FINAL, b, 0, offs_r, col_mask, R, 1)
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
    n_first, n_second, n_third, n_start, n_d_out, n_g, n_skip_u = _load_backward_tile(
        U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, n_tiles - 1, columns, column_mask, L, R, TILE,
        S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    for i in range(0, n_tiles):
        tile = n_tiles - 1 - i
        first, second, third, start, d_out, g, skip_u = (
            n_first, n_second, n_third, n_start, n_d_out, n_g, n_skip_u
        )  # fmt: skip
        n_first, n_second, n_third, n_start, n_d_out, n_g, n_skip_u = _load_backward_tile(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tl.maximum(tile - 1, 0), columns,
            column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS,
            FULL_TILES,
        )  # fmt: skip
        mask = _tile_mask(tile, column_mask, L, TILE, S, SEGMENTS, BLOCK_R, FULL_TILES)
        offs = _tile_offsets(b, _tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R), columns, L, R)
        a, x, log_a, a2, m, gate_in, gate_decay, u = gates_of_row(
            first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE,
            SHARED_SFU, HAS_RESETS,
        )  # fmt: skip
        if FUSED_WRITE:
            checkpoint, _checkpoint_mask = _state_row(
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
    d_h0_row, _d_h0_mask = _state_row(D_H0, b, 0, offs_r, col_mask, R, 1)
    tl.store(d_h0_row, carry, mask=state_mask)
    store_partials(
        PARTIAL, b, offs_r, col_mask, R, a_param_factor,
        _sum_segments(acc_decay, SEGMENTS, BLOCK_R), _sum_segments(acc_wa, SEGMENTS, BLOCK_R),
        _sum_segments(acc_wx, SEGMENTS, BLOCK_R), _sum_segments(acc_ba, SEGMENTS, BLOCK_R),
        _sum_segments(acc_bx, SEGMENTS, BLOCK_R), _sum_segments(acc_logc, SEGMENTS, BLOCK_R),
        _sum_segments(acc_skip, SEGMENTS, BLOCK_R), GATE_MODE,
    )  # fmt: skip
