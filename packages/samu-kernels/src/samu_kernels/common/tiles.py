"""Register tiles of the time-split kernels (``split.py``): layout, loads, masks,
checkpoints and the scans.

A tile of TILE rows (whole chunks) is cut into SEGMENTS segments of S = TILE / SEGMENTS
consecutive rows, and its columns w * BLOCK_R + c are channel c of segment w. It is held as
a tuple of S [SEGMENTS * BLOCK_R] vectors, *tile rows*: tile row k holds row w * S + k of
every segment w. A thread holds ``geometry.COLUMNS_PER_THREAD`` = 1 column (the launcher
sizes SEGMENTS for it), so S consecutive rows of it, in separate registers. Which column is
Triton's layout: Triton 3.6 (the H200's) and 3.9 lay each vector over the program's 32 * W
threads one column per thread, thread t column t: with BLOCK_R 64, 32 or 16 a warp holds
half a segment, one or two, and its load of a tile row reads 32 consecutive channels or runs
of 16 (a program owning fewer channels than BLOCK_R, ``Tile.channels``, masks the rest).
The scan inside a segment is then a chain of FMAs in each thread (:func:`segment_steps`,
:func:`states_from`, :func:`reverse_segment_steps`) with each row's neighbour at hand, and
row k's element offsets are row 0's plus the constant k * R (an immediate of the loads and
stores); per tile, one exchange of the segment steps through shared memory and a composition
inside every thread (:func:`enter_segments`) joins the segments.

(The first version held the tile as one [S, SEGMENTS * BLOCK_R] tensor and scanned it with
``tl.associative_scan`` along axis 0: (inclusive, exclusive) pairs composed per row and the
segments' last rows picked by masked sums: 1.4-1.5x the SASS instructions of this form for
the SAMU and RG-LRU gates, 2x for precomputed ones; docs/performance.md, "Tile rows in
registers".)
"""

import triton
import triton.language as tl

from samu_kernels.common.chunk import (
    GATES_PRECOMPUTED,
    GATES_RGLRU,
    GATES_SAMU,
    OUT_H,
    channel_constants,
    load_output_inputs,
    load_row,
    load_skip_input,
    output_grad,
    row_is_start,
    state_offsets,
)
from samu_kernels.common.geometry import CHANNELS_PER_WARP
from samu_kernels.common.kernels import program_lanes

LANES_PER_WARP: tl.constexpr = tl.constexpr(CHANNELS_PER_WARP)


@triton.jit
def per_segment(x, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """A per-channel [BLOCK_R] vector repeated for every segment: [SEGMENTS * BLOCK_R], one
    value per tile column."""
    return tl.reshape(tl.broadcast_to(x[None, :], [SEGMENTS, BLOCK_R]), [SEGMENTS * BLOCK_R])


@triton.jit
def sum_segments(x, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """Per-channel [BLOCK_R] sums of a [SEGMENTS * BLOCK_R] vector over its segments."""
    return tl.sum(tl.reshape(x, [SEGMENTS, BLOCK_R]), 0)


@triton.jit
def state_vector(STATE, b, chunk, columns, R, n_rows):
    """Pointers to one row of a [B, n_rows, R] fp32 state tensor as a tile vector
    ([SEGMENTS * BLOCK_R]: every segment's column points at its channel; the tile columns'
    mask is the row's)."""
    return STATE + state_offsets(b, chunk, columns, R, n_rows)


@triton.jit
def first_segment(column_mask, BLOCK_R: tl.constexpr):
    """The mask of a state row's store from a tile vector: segment 0's columns only."""
    return column_mask & (tl.arange(0, column_mask.shape[0]) < BLOCK_R)


@triton.jit
def program_columns(column, R: tl.constexpr, BLOCK_R: tl.constexpr, CHANNELS: tl.constexpr,
                    SEGMENTS: tl.constexpr):  # fmt: skip
    """Channel block ``column``'s batch row, channels [BLOCK_R] and their mask (CHANNELS of
    them its own, :func:`kernels.program_lanes`), then the tile columns' channels and mask
    ([SEGMENTS * BLOCK_R])."""
    b, offs_r, col_mask = program_lanes(column, R, BLOCK_R, CHANNELS)
    return (
        b, offs_r, col_mask, per_segment(offs_r, SEGMENTS, BLOCK_R),
        per_segment(col_mask, SEGMENTS, BLOCK_R),
    )  # fmt: skip


@triton.jit
def program_constants(column, CHANNEL, SCALARS, R: tl.constexpr, BLOCK_R: tl.constexpr,
                      CHANNELS: tl.constexpr, SEGMENTS: tl.constexpr, GATE_MODE: tl.constexpr,
                      OUT_MODE: tl.constexpr):  # fmt: skip
    """Channel block ``column``'s :func:`program_columns` and :func:`chunk.channel_constants`,
    the per-element ones (decay_scale, w_a, w_x) given per tile column, then decay_scale
    again per channel ([BLOCK_R], for :func:`chunk.store_partials`)."""
    b, offs_r, col_mask, columns, column_mask = program_columns(
        column, R, BLOCK_R, CHANNELS, SEGMENTS
    )
    decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    return (
        b, offs_r, col_mask, columns, column_mask, per_segment(decay_scale, SEGMENTS, BLOCK_R),
        a_param_factor, per_segment(w_a, SEGMENTS, BLOCK_R),
        per_segment(w_x, SEGMENTS, BLOCK_R), b_a, b_x, skip, decay_scale,
    )  # fmt: skip


@triton.jit
def store_checkpoints(SAVED, b, rows, states_before, columns, mask, R, n_chunks,
                       T: tl.constexpr):  # fmt: skip
    """Store the state entering each chunk that starts inside a tile (its rows at multiples
    of T) into SAVED [B, n_chunks, R]."""
    starts = mask & (rows % T == 0)
    offsets = state_offsets(b, rows // T, columns, R, n_chunks)
    tl.store(SAVED + offsets, states_before, mask=starts)


@triton.jit
def segment_starts(tile, TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr,
                   BLOCK_R: tl.constexpr):  # fmt: skip
    """[SEGMENTS * BLOCK_R] int32: the first time step of each column's segment in tile
    ``tile`` (tile row k's time steps are these plus k)."""
    return tile * TILE + (tl.arange(0, SEGMENTS * BLOCK_R) // BLOCK_R) * S


@triton.jit
def segment_offsets(b, starts, columns, L, R):
    """int64 element offsets [SEGMENTS * BLOCK_R] of tile row 0 (``starts``) in a [B, L, R]
    tensor (``columns``: each column's channel)."""
    return (b.to(tl.int64) * L + starts) * R + columns


@triton.jit
def row_mask(starts, k: tl.constexpr, column_mask, L, FULL_TILES: tl.constexpr):
    """In-bounds elements of tile row ``k`` (the mask :func:`chunk.load_row` used)."""
    mask = column_mask
    if not FULL_TILES:
        mask = mask & (starts + k < L)
    return mask


@triton.jit
def load_tile_rows(
    U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, columns, column_mask, L, R: tl.constexpr,
    TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr, HAS_RESETS: tl.constexpr,
    FULL_TILES: tl.constexpr, BACKWARD: tl.constexpr,
):  # fmt: skip
    """The raw inputs of tile ``tile``'s S rows, a tuple of S tuples: the forward's (first,
    second, third, start, y, skip_u) (:func:`chunk.load_row`, :func:`chunk.load_output_inputs`)
    or, BACKWARD, (first, second, third, start, d_out, g, skip_u) (:func:`chunk.output_grad`;
    GRAD_OUT is read only then)."""
    starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
    offs = segment_offsets(b, starts, columns, L, R)
    rows = ()
    for k in tl.static_range(S):
        first, second, third, start, mask = load_row(
            U, GATE_X, GATE_A, RESET, b, starts + k, offs + k * R, columns, column_mask, L,
            GATE_MODE, HAS_RESETS, FULL_TILES,
        )  # fmt: skip
        if BACKWARD:
            d_out, _y, g = output_grad(Y, GRAD_OUT, offs + k * R, mask, OUT_MODE)
            skip_u = load_skip_input(U, offs + k * R, mask, first, GATE_MODE, OUT_MODE)
            row = (first, second, third, start, d_out, g, skip_u)
        else:
            y, skip_u = load_output_inputs(U, Y, offs + k * R, mask, first, GATE_MODE, OUT_MODE)
            row = (first, second, third, start, y, skip_u)  # type: ignore[assignment]
        rows = rows + (row,)  # type: ignore[assignment]  # noqa: RUF005
    return rows


@triton.jit
def box_rows(DESC, b, tile, column0, TILE: tl.constexpr, S: tl.constexpr,
             SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
    """Tile ``tile`` of a [B, L, R] tensor through its descriptor: one [1, TILE, BLOCK_R] box
    from channel ``column0`` (rows past L and channels past R read 0, as the masked pointer
    loads' ``other``; lanes past a program's own CHANNELS read its neighbour's, never
    stored) in the row form, S fp32 [SEGMENTS * BLOCK_R] tile rows."""
    box = tl.reshape(DESC.load([b, tile * TILE, column0]), [SEGMENTS, S, BLOCK_R])
    by_column = tl.reshape(tl.permute(box, [0, 2, 1]), [SEGMENTS * BLOCK_R, S])
    return columns_of(by_column.to(tl.float32), S)


@triton.jit
def load_tile_boxes(
    U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, column0, L, TILE: tl.constexpr,
    S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, HAS_RESETS: tl.constexpr, BACKWARD: tl.constexpr,
):  # fmt: skip
    """:func:`load_tile_rows`' tuple, the same values on the program's own lanes (past its
    CHANNELS, the neighbour's where the pointer loads read 0), from the [B, L, R] inputs' tensor
    descriptors: one box per input (:func:`box_rows`), which the tile loop's
    ``tl.range(num_stages=...)`` turns into asynchronous copies several tiles ahead. The
    [B, L] uint8 document-start flags stay a pointer (one byte per row: as a [1, TILE] box
    of bytes they faulted with a misaligned address on the H100, Triton 3.6). Fused gates
    only: precomputed ones take pointers (``launch._Geometry.tma_stages``)."""
    tl.static_assert(GATE_MODE != GATES_PRECOMPUTED, "precomputed gates load through pointers")
    if GATE_MODE == GATES_SAMU:
        firsts = box_rows(U, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
    else:
        firsts = box_rows(GATE_A, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
        seconds = box_rows(U, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
        thirds = box_rows(GATE_X, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
    first_steps = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)  # read with resets only
    if OUT_MODE != OUT_H:
        ys = box_rows(Y, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
    if BACKWARD:
        d_outs = box_rows(GRAD_OUT, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
    rows = ()
    for k in tl.static_range(S):
        first = firsts[k]
        second = tl.zeros_like(first)
        third = second
        y = first  # stands in where the output mode reads no y (``chunk.load_output_inputs``)
        skip_u = first  # a placeholder: only precomputed gates read it
        if GATE_MODE == GATES_RGLRU:
            second = seconds[k]
            third = thirds[k]
        start = row_is_start(RESET, b, first_steps + k, first_steps, L, HAS_RESETS)
        if BACKWARD:
            d_out = d_outs[k]
            g = d_out
            if OUT_MODE != OUT_H:
                g = d_out * ys[k]
            row = (first, second, third, start, d_out, g, skip_u)
        else:
            if OUT_MODE != OUT_H:
                y = ys[k]
            row = (first, second, third, start, y, skip_u)  # type: ignore[assignment]
        rows = rows + (row,)  # type: ignore[assignment]  # noqa: RUF005
    return rows


@triton.jit
def segment_steps(a_rows, x_rows, S: tl.constexpr):
    """Every segment's step h_out = decay * h_in + h over its S rows h_k = a_k h_{k-1} + x_k
    (one FMA and one product of decays per row, inside the threads): (decay, h),
    [SEGMENTS * BLOCK_R] vectors, for :func:`enter_segments`."""
    h = x_rows[0]
    decay = a_rows[0]
    for k in tl.static_range(1, S):
        h = a_rows[k] * h + x_rows[k]
        decay = a_rows[k] * decay
    return decay, h


@triton.jit
def states_from(entering, a_rows, x_rows, S: tl.constexpr):
    """The states h_k = a_k h_{k-1} + x_k of every segment's S rows from the state
    ``entering`` it (:func:`enter_segments`): a tuple of S [SEGMENTS * BLOCK_R] vectors, one
    FMA per row. The forward's outputs and the backward's recomputed states both come from
    here, so the backward's states are the forward's bit for bit."""
    h = entering
    states = ()
    for k in tl.static_range(S):
        h = a_rows[k] * h + x_rows[k]
        states = states + (h,)  # type: ignore[assignment]  # noqa: RUF005
    return states


@triton.jit
def reverse_segment_steps(a_rows, g_rows, S: tl.constexpr):
    """Every segment's step of the reverse scan c_k = a_k (g_k + c_{k+1}) over its S rows,
    entered after its last row: (decay, c) with c at its first row = decay * c_in + c
    ([SEGMENTS * BLOCK_R] vectors, for :func:`enter_segments` with REVERSE)."""
    c = a_rows[S - 1] * g_rows[S - 1]
    decay = a_rows[S - 1]
    for k in tl.static_range(S - 2, -1, -1):
        c = a_rows[k] * (g_rows[k] + c)
        decay = a_rows[k] * decay
    return decay, c


@triton.jit
def columns_of(block, S: tl.constexpr):
    """The S columns of an [N, S] tensor as a tuple of S [N] vectors (halved with
    ``tl.split`` down to single columns: register renames when a thread holds a whole row)."""
    if S == 1:
        return (tl.reshape(block, [block.shape[0]]),)
    else:  # noqa: RET505  (both branches are needed: Triton resolves the test at compile time)
        even, odd = tl.split(tl.reshape(block, [block.shape[0], S // 2, 2]))
        evens = columns_of(even, S // 2)
        odds = columns_of(odd, S // 2)
        columns = ()
        for k in tl.static_range(S // 2):
            columns = columns + (evens[k], odds[k])  # type: ignore[assignment]  # noqa: RUF005
        return columns


@triton.jit
def gather_segments(a, x, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """Every segment's (a, x) of two [SEGMENTS * BLOCK_R] tile vectors at every tile column
    (one exchange through shared memory): a tuple of 2 * SEGMENTS vectors, a of segment j at
    2 j and x at 2 j + 1, for each column's channel."""
    pairs = tl.reshape(tl.join(a, x), [SEGMENTS, BLOCK_R, 2])
    by_channel = tl.permute(pairs, [1, 0, 2])
    everywhere = tl.broadcast_to(by_channel[None, :, :, :], [SEGMENTS, BLOCK_R, SEGMENTS, 2])
    return columns_of(tl.reshape(everywhere, [SEGMENTS * BLOCK_R, 2 * SEGMENTS]), 2 * SEGMENTS)


@triton.jit
def enter_segments(seg_a, seg_x, carry, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
                   REVERSE: tl.constexpr):  # fmt: skip
    """The states entering each segment of a tile whose segments' steps are (seg_a, seg_x)
    [SEGMENTS * BLOCK_R] (h_out = seg_a h_in + seg_x), the tile entered with ``carry``
    [SEGMENTS * BLOCK_R] (the same value in every segment; REVERSE: segments in reverse
    order, entered at the tile's end).

    Returns (entering, leaving), [SEGMENTS * BLOCK_R]: every thread gathers its channel's
    segment steps (one exchange through shared memory) and composes them in order."""
    steps = gather_segments(seg_a, seg_x, SEGMENTS, BLOCK_R)
    segment = tl.arange(0, SEGMENTS * BLOCK_R) // BLOCK_R
    h = carry
    entering = carry
    for i in tl.static_range(SEGMENTS - 1):
        if REVERSE:
            h = steps[2 * (SEGMENTS - 1 - i)] * h + steps[2 * (SEGMENTS - 1 - i) + 1]
            entering = tl.where(segment == SEGMENTS - 2 - i, h, entering)
        else:
            h = steps[2 * i] * h + steps[2 * i + 1]
            entering = tl.where(segment == i + 1, h, entering)
    if REVERSE:
        leaving = steps[0] * h + steps[1]
    else:
        leaving = steps[2 * SEGMENTS - 2] * h + steps[2 * SEGMENTS - 1]
    return entering, leaving


@triton.jit
def entering_from_checkpoints(SAVED, b, tile, seg_a, seg_x, columns, column_mask, R, n_chunks,
                              L, T: tl.constexpr, TILE: tl.constexpr, S: tl.constexpr,
                              SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
    """The states entering each segment of backward tile ``tile``, recomputed from the
    forward's checkpoints (``fused_write``: the state entering every chunk, SAVED
    [B, n_chunks, R] fp32), bit for bit the forward's. S and T are powers of two, so either
    every segment starts a chunk (S >= T) and enters with its chunk's checkpoint, or a chunk
    holds T / S segments: where those share a warp (BLOCK_R * T / S <= 32 lanes), each
    composes its predecessors' steps (seg_a, seg_x) [SEGMENTS * BLOCK_R] onto its chunk's
    checkpoint, in order as the forward's join did, taking them by masked sums along the
    segments' axis (warp shuffles: no shared memory, no barrier); else the tile's segments
    are joined from its first checkpoint (:func:`join_from_first_checkpoint`). Segments past
    L enter with zeros (their rows are masked).

    Returns [SEGMENTS * BLOCK_R] fp32."""
    PER_CHUNK: tl.constexpr = max(T // S, 1)
    if PER_CHUNK * BLOCK_R <= LANES_PER_WARP:
        starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
        entering = tl.load(
            SAVED + state_offsets(b, starts // T, columns, R, n_chunks),
            mask=column_mask & (starts < L),
            other=0.0,
        )
        if PER_CHUNK > 1:
            shape: tl.constexpr = [SEGMENTS // PER_CHUNK, PER_CHUNK, BLOCK_R]
            place = tl.arange(0, PER_CHUNK)[None, :, None]
            decay = tl.reshape(seg_a, shape)
            step = tl.reshape(seg_x, shape)
            h = tl.reshape(entering, shape)
            for i in tl.static_range(PER_CHUNK - 1):
                decay_i = tl.sum(tl.where(place == i, decay, 0.0), axis=1)[:, None, :]
                step_i = tl.sum(tl.where(place == i, step, 0.0), axis=1)[:, None, :]
                h = tl.where(place > i, decay_i * h + step_i, h)
            entering = tl.reshape(h, [SEGMENTS * BLOCK_R])
    else:
        entering = join_from_first_checkpoint(
            SAVED, b, tile, seg_a, seg_x, columns, column_mask, R, n_chunks, T, TILE, SEGMENTS,
            BLOCK_R,
        )  # fmt: skip
    return entering


@triton.jit
def join_from_first_checkpoint(SAVED, b, tile, seg_a, seg_x, columns, column_mask, R, n_chunks,
                               T: tl.constexpr, TILE: tl.constexpr, SEGMENTS: tl.constexpr,
                               BLOCK_R: tl.constexpr):  # fmt: skip
    """The states entering each segment of backward tile ``tile`` joined across the tile
    from the checkpoint of its first chunk (:func:`enter_segments`: one exchange of the steps
    (seg_a, seg_x) through shared memory, one FMA per segment), as the forward joins them.

    Returns [SEGMENTS * BLOCK_R] fp32."""
    first = state_offsets(b, tile * (TILE // T), columns, R, n_chunks)
    checkpoint = tl.load(SAVED + first, mask=column_mask, other=0.0)
    entering, _leaving = enter_segments(seg_a, seg_x, checkpoint, SEGMENTS, BLOCK_R, False)
    return entering
