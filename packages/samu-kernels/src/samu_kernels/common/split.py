"""Time-split sequential kernels: the warps of one program share each tile's rows.

The row walk (``kernels.forward_sequential_kernel``) gives a program one warp and walks a
chunk row by row; with one program per (batch row, channel block) that leaves ~2 warps per
SM on the reference shapes, each waiting on its own loads. Here a program of ``split`` warps
walks its sequence in tiles of TILE rows (whole chunks: TILE is a multiple of the chunk T),
each cut into SEGMENTS segments of S consecutive rows and held in the row form of
``tiles.py``: a tuple of S [SEGMENTS * BLOCK_R] vectors, tile row k holding row k of every
segment, so that a thread holds S consecutive rows of its columns in separate registers.

Forward, per tile: every thread loads its S rows (the whole tile's loads in flight at once,
and the next tile's issued before this one is computed), evaluates the gates and composes
each segment's S steps into one with one FMA and one product of decays per row
(:func:`tiles.segment_steps`); the join (:func:`tiles.enter_segments`: the segment steps
gathered by every thread, composed in order) gives each segment the state entering it (the
carry between tiles is held by every segment's threads of its channel), from which the
segment's rows are scanned again, one FMA per row (:func:`tiles.states_from`); the states
entering the tile's chunks are its checkpoints (FUSED_WRITE). The backward is the same
reversed: the tile's states are recomputed from the checkpoint of its first chunk (the
forward's own scans of the same tile, so bit for bit the forward's states), then the
reverse scan c_t = a_t (g_t + c_{t+1}) is composed per segment
(:func:`tiles.reverse_segment_steps`), joined across segments, and run again from each
segment's end, giving dL/dh_t = g_t + c_{t+1} row by row, last row first, as each row's
gradients are stored. Scanning twice instead of keeping each row's state and decay product
from a zero start (and, in reverse, each row's partial gradient and suffix product) leaves
the backward one value per element to hold instead of two per direction
(docs/performance.md, "Each segment scanned twice"). Inputs are read once per direction, gates
evaluated once per element.

Loads: by default each tile row is loaded through pointers, the next tile's rows issued
before this tile is computed (double-buffered in registers). With ``tma=N`` in the geometry
(``SAMU_KERNELS_TILE``; the heuristic's for SAMU's fused gates), each [B, L, R] input's
tile is one [1, TILE, BLOCK_R] box copied by the Tensor Memory Accelerator through a
host-side tensor descriptor, N tiles in flight (``tl.range(num_stages=N)``), then read from
shared memory into the row form (:func:`tiles.load_tile_boxes`); on the lanes a program owns
the values are the pointer loads' bit for bit, and so is everything stored.

The per-element math is ``chunk.py``'s (:func:`chunk.load_row`, :func:`chunk.gates_of_row`,
:func:`chunk.output_of`, :func:`chunk.input_gradients`), applied to tile rows.
"""

import triton
import triton.language as tl

from samu_kernels.common.chunk import (
    GATES_PRECOMPUTED,
    OUT_Y_H_SKIP,
    accumulate_terms,
    channel_block_start,
    gates_of_row,
    input_gradients,
    output_of,
    store_partials,
)
from samu_kernels.common.tiles import (
    box_rows,
    enter_segments,
    first_segment,
    load_tile_boxes,
    load_tile_rows,
    program_constants,
    reverse_segment_steps,
    row_mask,
    segment_offsets,
    segment_starts,
    segment_steps,
    state_vector,
    states_from,
    store_checkpoints,
    sum_segments,
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
    CHANNELS: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_TILES: tl.constexpr,
    HAS_H0: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    DESCRIBED: tl.constexpr,
    TILE_STAGES: tl.constexpr,
):
    """Forward of one (batch row, channel block: CHANNELS channels on BLOCK_R lanes, the rest
    masked, ``Tile.channels``): its tiles of TILE rows (a multiple of the
    chunk T) in order, each cut into SEGMENTS segments scanned side by side by the program's
    threads (``launch.split_flags``); with FUSED_WRITE, the state entering every chunk goes
    to SAVED. DESCRIBED: U, GATE_X, GATE_A and Y are tensor descriptors, each tile loaded as
    one box per input, TILE_STAGES tiles in flight (``tiles.load_tile_boxes``; RESET stays a
    pointer); else pointers, the next tile's rows loaded while this one is computed."""
    S: tl.constexpr = TILE // SEGMENTS
    n_tiles = tl.cdiv(L, TILE)
    (b, _offs_r, _col_mask, columns, column_mask, decay_scale, _a_param_factor, w_a, w_x, b_a,
     b_x, skip, _channel_decay_scale) = program_constants(
        tl.program_id(0), CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS, GATE_MODE, OUT_MODE
    )  # fmt: skip
    final_row = state_vector(FINAL, b, 0, columns, R, 1)
    if HAS_H0:
        h = tl.load(state_vector(H0, b, 0, columns, R, 1), mask=column_mask, other=0.0)
    else:
        h = tl.zeros([SEGMENTS * BLOCK_R], dtype=tl.float32)
    column0 = channel_block_start(tl.program_id(0), R, CHANNELS)
    if not DESCRIBED:
        # Double-buffered: tile i + 1's loads are issued before tile i is computed (the last
        # iteration reloads the last tile instead of reading past the end).
        next_rows = load_tile_rows(
            U, GATE_X, GATE_A, Y, RESET, U, b, 0, columns, column_mask, L, R, TILE, S,
            SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES, False,
        )  # fmt: skip
    for tile in tl.range(0, n_tiles, num_stages=TILE_STAGES):
        if DESCRIBED:
            rows = load_tile_boxes(
                U, GATE_X, GATE_A, Y, RESET, U, b, tile, column0, L, TILE, S, SEGMENTS,
                BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, False,
            )  # fmt: skip
        else:
            rows = next_rows
            next_rows = load_tile_rows(
                U, GATE_X, GATE_A, Y, RESET, U, b, tl.minimum(tile + 1, n_tiles - 1), columns,
                column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS,
                FULL_TILES, False,
            )  # fmt: skip
        starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = segment_offsets(b, starts, columns, L, R)
        a_rows = ()
        x_rows = ()
        u_rows = ()
        for k in tl.static_range(S):
            first, second, third, start, _y, _skip_u = rows[k]
            a, x, _a2, _m, _gate_in, _gate_decay, u = gates_of_row(
                first, second, third, start, row_mask(starts, k, column_mask, L, FULL_TILES),
                decay_scale, w_a, w_x, b_a, b_x, GATE_MODE, SHARED_SFU, HAS_RESETS,
            )  # fmt: skip
            a_rows = a_rows + (a,)  # type: ignore[assignment]  # noqa: RUF005
            x_rows = x_rows + (x,)  # type: ignore[assignment]  # noqa: RUF005
            u_rows = u_rows + (u,)  # type: ignore[assignment]  # noqa: RUF005
        seg_decay, seg_h = segment_steps(a_rows, x_rows, S)
        entering, h = enter_segments(seg_decay, seg_h, h, SEGMENTS, BLOCK_R, False)
        states = states_from(entering, a_rows, x_rows, S)
        before = entering
        for k in tl.static_range(S):
            mask = row_mask(starts, k, column_mask, L, FULL_TILES)
            state = states[k]
            if FUSED_WRITE:
                if k % T == 0:
                    store_checkpoints(SAVED, b, starts + k, before, columns, mask, R, n_chunks, T)
            else:
                tl.store(SAVED + offs + k * R, state, mask=mask)
            _first, _second, _third, _start, y, skip_u = rows[k]
            out = output_of(state, y, skip_u, u_rows[k], skip, GATE_MODE, OUT_MODE)
            tl.store(OUT + offs + k * R, out.to(OUT.dtype.element_ty), mask=mask)
            before = state
    tl.store(final_row, h, mask=first_segment(column_mask, BLOCK_R))


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
    CHANNELS: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_TILES: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    DESCRIBED: tl.constexpr,
    TILE_STAGES: tl.constexpr,
):
    """Backward of one (batch row, channel block): its tiles from the last, segments as in
    the forward, the states recomputed from the checkpoint of the tile's first chunk
    (FUSED_WRITE); one row of PARTIAL per program (its batch row's, like
    ``backward_sequential_kernel``). DESCRIBED: as the forward's, GRAD_OUT and (without
    FUSED_WRITE) SAVED too."""
    S: tl.constexpr = TILE // SEGMENTS
    CHUNKS_PER_TILE: tl.constexpr = TILE // T
    n_tiles = tl.cdiv(L, TILE)
    (b, offs_r, col_mask, columns, column_mask, decay_scale, a_param_factor, w_a, w_x, b_a, b_x,
     skip, channel_decay_scale) = program_constants(
        tl.program_id(0), CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS, GATE_MODE, OUT_MODE
    )  # fmt: skip
    final_row = state_vector(GRAD_FINAL, b, 0, columns, R, 1)
    # c_t = a_t dL/dh_t, entering the last row from the final state's gradient.
    carry = tl.load(final_row, mask=column_mask, other=0.0)
    zero = tl.zeros([SEGMENTS * BLOCK_R], dtype=tl.float32)
    accs = (zero, zero, zero, zero, zero, zero)
    column0 = channel_block_start(tl.program_id(0), R, CHANNELS)
    if not DESCRIBED:
        next_rows = load_tile_rows(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, n_tiles - 1, columns, column_mask, L, R,
            TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES, True,
        )  # fmt: skip
    for i in tl.range(0, n_tiles, num_stages=TILE_STAGES):
        tile = n_tiles - 1 - i
        if DESCRIBED:
            rows = load_tile_boxes(
                U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, column0, L, TILE, S,
                SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, True,
            )  # fmt: skip
        else:
            rows = next_rows
            next_rows = load_tile_rows(
                U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tl.maximum(tile - 1, 0), columns,
                column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS,
                FULL_TILES, True,
            )  # fmt: skip
        starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = segment_offsets(b, starts, columns, L, R)
        gates = ()
        a_rows = ()
        x_rows = ()
        g_rows = ()
        for k in tl.static_range(S):
            first, second, third, start, _d_out, g, _skip_u = rows[k]
            row_gates = gates_of_row(
                first, second, third, start, row_mask(starts, k, column_mask, L, FULL_TILES),
                decay_scale, w_a, w_x, b_a, b_x, GATE_MODE, SHARED_SFU, HAS_RESETS,
            )  # fmt: skip
            gates = gates + (row_gates,)  # type: ignore[assignment]  # noqa: RUF005
            a_rows = a_rows + (row_gates[0],)  # type: ignore[assignment]  # noqa: RUF005
            x_rows = x_rows + (row_gates[1],)  # type: ignore[assignment]  # noqa: RUF005
            g_rows = g_rows + (g,)  # type: ignore[assignment]  # noqa: RUF005
        # The tile's states: recomputed from its first checkpoint, or the saved ones.
        states = ()
        if FUSED_WRITE:
            checkpoint = state_vector(SAVED, b, tile * CHUNKS_PER_TILE, columns, R, n_chunks)
            seg_decay, seg_h = segment_steps(a_rows, x_rows, S)
            entering, _leaving = enter_segments(
                seg_decay, seg_h, tl.load(checkpoint, mask=column_mask, other=0.0), SEGMENTS,
                BLOCK_R, False,
            )  # fmt: skip
            states = states_from(entering, a_rows, x_rows, S)
        elif DESCRIBED:
            states = box_rows(SAVED, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
        else:
            for k in tl.static_range(S):
                mask = row_mask(starts, k, column_mask, L, FULL_TILES)
                states = states + (tl.load(SAVED + offs + k * R, mask=mask, other=0.0),)  # type: ignore[assignment]  # noqa: RUF005
        seg_decay, seg_c = reverse_segment_steps(a_rows, g_rows, S)
        c, carry = enter_segments(seg_decay, seg_c, carry, SEGMENTS, BLOCK_R, True)
        # The rows from the last: dL/dh_k = g_k + c_{k+1}, c_k = a_k dL/dh_k.
        for k in tl.static_range(S - 1, -1, -1):
            dh = g_rows[k] + c
            c = a_rows[k] * dh
            mask = row_mask(starts, k, column_mask, L, FULL_TILES)
            _first, _second, _third, start, d_out, g, skip_u = rows[k]
            _a, x, a2, m, gate_in, gate_decay, u = gates[k]  # type: ignore[var-annotated]
            if GATE_MODE == GATES_PRECOMPUTED and OUT_MODE == OUT_Y_H_SKIP:
                u = skip_u
            terms = input_gradients(
                D_U, D_GATE_X, D_GATE_A, D_Y, offs + k * R, mask, start, states[k], x, dh, d_out,
                g, a2, m, gate_in, gate_decay, u, decay_scale, w_a, w_x, skip, GATE_MODE,
                OUT_MODE, SHARED_SFU,
            )  # fmt: skip
            accs = accumulate_terms(accs, terms, GATE_MODE, OUT_MODE)
    # dL/dh0 = a_0 dL/dh_0 = c_0.
    d_h0_row = state_vector(D_H0, b, 0, columns, R, 1)
    tl.store(d_h0_row, carry, mask=first_segment(column_mask, BLOCK_R))
    acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip = accs
    store_partials(
        PARTIAL, b, offs_r, col_mask, R, a_param_factor, channel_decay_scale,
        sum_segments(acc_decay, SEGMENTS, BLOCK_R), sum_segments(acc_wa, SEGMENTS, BLOCK_R),
        sum_segments(acc_wx, SEGMENTS, BLOCK_R), sum_segments(acc_ba, SEGMENTS, BLOCK_R),
        sum_segments(acc_bx, SEGMENTS, BLOCK_R), sum_segments(acc_skip, SEGMENTS, BLOCK_R),
        GATE_MODE,
    )  # fmt: skip
