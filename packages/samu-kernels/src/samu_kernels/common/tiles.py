"""Register tiles of the time-split kernels (``split.py``): layout, loads, masks,
checkpoints and the scans.

A tile of TILE rows (whole chunks) is cut into SEGMENTS segments of S = TILE / SEGMENTS
consecutive rows, and its columns w * BLOCK_R + c are channel c of segment w. It is held as
a tuple of S [SEGMENTS * BLOCK_R] vectors, *tile rows*: tile row k holds row w * S + k of
every segment w. Each vector is spread over the threads two columns (adjacent channels) per
thread, so a thread holds S consecutive rows of its columns, in separate registers, and each
warp whole segments. The scan inside a segment is then a chain of FMAs in each thread
(:func:`scan_rows`, :func:`reverse_scan_rows`) with each row's neighbour at hand, and row
k's element offsets are row 0's plus the constant k * R (an immediate of the loads and
stores); one scan of the segment summaries across the threads (:func:`enter_segments`,
shared memory) per tile joins the segments.

(The first version held the tile as one [S, SEGMENTS * BLOCK_R] tensor and scanned it with
``tl.associative_scan`` along axis 0: (inclusive, exclusive) pairs composed per row and the
segments' last rows picked by masked sums: 1.4-1.5x the SASS instructions of this form for
the SAMU and RG-LRU gates, 2x for precomputed ones; docs/performance.md, "Tile rows in
registers".)
"""

import triton
import triton.language as tl

from samu_kernels.common.chunk import (
    channel_constants,
    load_output_inputs,
    load_row,
    load_skip_input,
    output_grad,
    state_offsets,
)
from samu_kernels.common.kernels import program_channels

COLUMNS_PER_THREAD: tl.constexpr = tl.constexpr(2)
"""Tile columns (adjacent channels) per thread: the contiguity the tile rows' offsets declare
(:func:`segment_offsets`); the launcher sizes SEGMENTS so that the program's threads cover
the columns."""


@triton.jit
def compose_pairs(a1, x1, ea1, ex1, a2, x2, ea2, ex2):
    """Composition of (inclusive, exclusive) step pairs, first (a1, x1) then (a2, x2): the
    inclusive parts compose as h -> a h + x; the exclusive part of the whole is the first's
    inclusive part then the second's exclusive one (``ea1``/``ex1`` are not needed)."""
    return a1 * a2, a2 * x1 + x2, a1 * ea2, ea2 * x1 + ex2


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
def pick(x, index, target: tl.constexpr, axis: tl.constexpr):
    """The slice of ``x`` at ``index == target`` along ``axis`` (a masked sum)."""
    return tl.sum(tl.where(index == target, x, 0.0), axis)


@triton.jit
def state_row(STATE, b, chunk, offs_r, col_mask, R, n_rows):
    """Pointers and mask of one [1, BLOCK_R] row of a [B, n_rows, R] fp32 state tensor."""
    return STATE + state_offsets(b, chunk, offs_r, R, n_rows)[None, :], col_mask[None, :]


@triton.jit
def program_constants(column, CHANNEL, SCALARS, R: tl.constexpr, BLOCK_R: tl.constexpr,
                      SEGMENTS: tl.constexpr, GATE_MODE: tl.constexpr,
                      OUT_MODE: tl.constexpr):  # fmt: skip
    """Channel block ``column``'s (batch row, channels [BLOCK_R], their mask), the tile
    columns' channels and mask ([SEGMENTS * BLOCK_R]) and :func:`chunk.channel_constants`,
    the per-element ones (decay_scale, w_a, w_x) given per tile column."""
    b, offs_r, col_mask = program_channels(column, R, BLOCK_R)
    decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    return (
        b, offs_r, col_mask, per_segment(offs_r, SEGMENTS, BLOCK_R),
        per_segment(col_mask, SEGMENTS, BLOCK_R), per_segment(decay_scale, SEGMENTS, BLOCK_R),
        a_param_factor, per_segment(w_a, SEGMENTS, BLOCK_R),
        per_segment(w_x, SEGMENTS, BLOCK_R), b_a, b_x, skip,
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
    tensor (``columns``: each column's channel). Declared contiguous in COLUMNS_PER_THREAD
    columns only: Triton's coalescing then gives a thread that many adjacent channels
    instead of spreading eight channels of a row over threads and warps."""
    return tl.max_contiguous((b.to(tl.int64) * L + starts) * R + columns, [COLUMNS_PER_THREAD])


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
def scan_rows(a_rows, x_rows, S: tl.constexpr):
    """The scan h_k = a_k h_{k-1} + x_k of every segment's S rows from a zero start, inside
    the threads: (hs, decays), tuples of S [SEGMENTS * BLOCK_R] vectors with the state after
    row k from a zero start and the product a_0 ... a_k (so the state entering the segment
    as e gives decays[k] * e + hs[k])."""
    h = x_rows[0]
    decay = a_rows[0]
    hs = (h,)
    decays = (decay,)
    for k in tl.static_range(1, S):
        h = a_rows[k] * h + x_rows[k]
        decay = a_rows[k] * decay
        hs = hs + (h,)  # type: ignore[assignment]  # noqa: RUF005
        decays = decays + (decay,)  # type: ignore[assignment]  # noqa: RUF005
    return hs, decays


@triton.jit
def reverse_scan_rows(a_rows, g_rows, S: tl.constexpr):
    """The reverse scan c_k = a_k (g_k + c_{k+1}) of every segment's S rows from c = 0 after
    its last row: (dhs, decays, c_first, decay_first). dhs[k] = g_k + c_{k+1} and decays[k]
    the product a_{k+1} ... a_{S-1} (1 for the last row), so that with c entering the
    segment's end as e, dL/dh_k = dhs[k] + decays[k] * e; (decay_first, c_first) is the
    segment's step, c at its first row = decay_first * e + c_first."""
    c = tl.zeros_like(g_rows[S - 1])
    decay = tl.full(c.shape, 1.0, tl.float32)
    dhs = ()
    decays = ()
    for i in tl.static_range(S):
        dh = g_rows[S - 1 - i] + c
        dhs = (dh,) + dhs  # type: ignore[assignment]  # noqa: RUF005
        decays = (decay,) + decays  # type: ignore[assignment]  # noqa: RUF005
        c = a_rows[S - 1 - i] * dh
        decay = a_rows[S - 1 - i] * decay
    return dhs, decays, c, decay


@triton.jit
def enter_segments(seg_a, seg_x, carry, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
                   REVERSE: tl.constexpr):  # fmt: skip
    """The states entering each segment of a tile whose segments' steps are (seg_a, seg_x)
    [SEGMENTS * BLOCK_R] (h_out = seg_a h_in + seg_x), the tile entered with ``carry``
    [1, BLOCK_R] (REVERSE: segments in reverse order, entered at the tile's end).

    Returns (entering [SEGMENTS * BLOCK_R], leaving [1, BLOCK_R]): one scan of the
    [SEGMENTS, BLOCK_R] summaries across the threads (shared memory) per tile."""
    sa = tl.reshape(seg_a, [SEGMENTS, BLOCK_R])
    sx = tl.reshape(seg_x, [SEGMENTS, BLOCK_R])
    ia, ix, wa, wx = tl.associative_scan(
        (sa, sx, tl.full(sa.shape, 1.0, tl.float32), tl.zeros(sa.shape, tl.float32)),
        0,
        compose_pairs,
        reverse=REVERSE,
    )
    w = tl.arange(0, SEGMENTS)[:, None]
    last_segment: tl.constexpr = 0 if REVERSE else SEGMENTS - 1
    tile_a = pick(ia, w, last_segment, 0)[None, :]
    tile_x = pick(ix, w, last_segment, 0)[None, :]
    entering = tl.reshape(wa * carry + wx, [SEGMENTS * BLOCK_R])
    return entering, tile_a * carry + tile_x
