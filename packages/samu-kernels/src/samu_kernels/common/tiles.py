"""Register tiles of the time-split kernels (``split.py``, ``lookback.py``): layout, loads,
masks, checkpoints and the tile scan.

A tile of TILE rows (whole chunks) is cut into SEGMENTS segments of S = TILE / SEGMENTS
consecutive rows and held as one [S, SEGMENTS * BLOCK_R] register tile whose column
w * BLOCK_R + c is channel c of segment w (element (s, w * BLOCK_R + c) is row w * S + s).
Only axis 1 is spread over threads (two channels per thread, the most contiguous axis, so
that Triton's coalescing puts it fastest in every version), so a thread holds S consecutive
rows of its columns and each warp whole segments. :func:`scan_tile` scans each thread's
rows in registers (``tl.associative_scan`` along axis 0, inside the thread) and the segment
summaries as [SEGMENTS, BLOCK_R] (shared memory); the scans carry (inclusive, exclusive)
pairs (:func:`compose_pairs`), so that no value has to move between rows.
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
"""Tile columns (pairs of adjacent channels) per thread: the contiguity the tiles' offsets
declare (:func:`tile_offsets`), so that Triton's coalescing spreads the threads along axis 1
only; the launcher sizes SEGMENTS so that the program's threads cover the columns."""


@triton.jit
def compose_pairs(a1, x1, ea1, ex1, a2, x2, ea2, ex2):
    """Composition of (inclusive, exclusive) step pairs, first (a1, x1) then (a2, x2): the
    inclusive parts compose as h -> a h + x; the exclusive part of the whole is the first's
    inclusive part then the second's exclusive one (``ea1``/``ex1`` are not needed)."""
    return a1 * a2, a2 * x1 + x2, a1 * ea2, ea2 * x1 + ex2


@triton.jit
def tile_rows(tile, TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr,
               BLOCK_R: tl.constexpr):  # fmt: skip
    """[S, SEGMENTS * BLOCK_R] int32 time steps of tile ``tile``: row w * S + s at (s, column
    w * BLOCK_R + c)."""
    s = tl.arange(0, S)[:, None]
    w = (tl.arange(0, SEGMENTS * BLOCK_R) // BLOCK_R)[None, :]
    return tile * TILE + w * S + s


@triton.jit
def per_segment(x, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """A per-channel [BLOCK_R] vector repeated for every segment: [1, SEGMENTS * BLOCK_R]."""
    return tl.reshape(tl.broadcast_to(x[None, :], [SEGMENTS, BLOCK_R]), [1, SEGMENTS * BLOCK_R])


@triton.jit
def sum_segments(x, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """Per-channel [BLOCK_R] sums of a [SEGMENTS * BLOCK_R] vector over its segments."""
    return tl.sum(tl.reshape(x, [SEGMENTS, BLOCK_R]), 0)


@triton.jit
def pick(x, index, target: tl.constexpr, axis: tl.constexpr):
    """The slice of ``x`` at ``index == target`` along ``axis`` (a masked sum)."""
    return tl.sum(tl.where(index == target, x, 0.0), axis)


@triton.jit
def scan_tile_local(a, x, S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
                    REVERSE: tl.constexpr):  # fmt: skip
    """The part of :func:`scan_tile` that does not need the entering state: the scan of
    h_t = a_t h_{t-1} + x_t (REVERSE: from the last row) over a [S, SEGMENTS * BLOCK_R]
    tile from a zero start.

    Returns (pa, px, ea, ex, wa, wx, tile_a, tile_x): each row's inclusive (pa, px) and
    exclusive (ea, ex) steps from its segment's start, [S, SEGMENTS * BLOCK_R]; each
    segment's step from the tile's start (wa, wx) [SEGMENTS, BLOCK_R]; the whole tile's
    step (tile_a, tile_x) [1, BLOCK_R] (its summary: h_leaving = tile_a h_in + tile_x).
    """
    one = tl.full(a.shape, 1.0, tl.float32)
    zero = tl.zeros(a.shape, tl.float32)
    pa, px, ea, ex = tl.associative_scan((a, x, one, zero), 0, compose_pairs, reverse=REVERSE)
    s = tl.arange(0, S)[:, None]
    end: tl.constexpr = 0 if REVERSE else S - 1
    seg_a = tl.reshape(pick(pa, s, end, 0), [SEGMENTS, BLOCK_R])
    seg_x = tl.reshape(pick(px, s, end, 0), [SEGMENTS, BLOCK_R])
    ia, ix, wa, wx = tl.associative_scan(
        (seg_a, seg_x, tl.full(seg_a.shape, 1.0, tl.float32), tl.zeros(seg_a.shape, tl.float32)),
        0,
        compose_pairs,
        reverse=REVERSE,
    )
    w = tl.arange(0, SEGMENTS)[:, None]
    last_segment: tl.constexpr = 0 if REVERSE else SEGMENTS - 1
    tile_a = pick(ia, w, last_segment, 0)[None, :]
    tile_x = pick(ix, w, last_segment, 0)[None, :]
    return pa, px, ea, ex, wa, wx, tile_a, tile_x


@triton.jit
def enter_tile(pa, px, ea, ex, wa, wx, carry, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):
    """The states of a tile scanned by :func:`scan_tile_local`, entered with ``carry``
    [1, BLOCK_R]: (after each row, before each row), [S, SEGMENTS * BLOCK_R]."""
    entering = tl.reshape(wa * carry + wx, [1, SEGMENTS * BLOCK_R])
    return pa * entering + px, ea * entering + ex


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
    pa, px, ea, ex, wa, wx, tile_a, tile_x = scan_tile_local(a, x, S, SEGMENTS, BLOCK_R, REVERSE)
    states, states_before = enter_tile(pa, px, ea, ex, wa, wx, carry, SEGMENTS, BLOCK_R)
    return states, states_before, tile_a * carry + tile_x


@triton.jit
def tile_offsets(b, rows, columns, L, R):
    """int64 element offsets [S, SEGMENTS * BLOCK_R] of a tile's rows in a [B, L, R] tensor
    (``columns``: each column's channel, [1, SEGMENTS * BLOCK_R]). Declared contiguous in
    COLUMNS_PER_THREAD columns only: Triton's coalescing then gives a thread that many
    channels (and all S rows) instead of eight channels of rows spread over threads and
    warps, which would put the scan's axis across them."""
    return tl.max_contiguous((b.to(tl.int64) * L + rows) * R + columns, [1, COLUMNS_PER_THREAD])


@triton.jit
def load_tile_gates(
    U, GATE_X, GATE_A, RESET, b, tile, columns, column_mask, L, R, TILE: tl.constexpr,
    S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, GATE_MODE: tl.constexpr,
    HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
):  # fmt: skip
    """:func:`chunk.load_row` on a tile's [S, SEGMENTS * BLOCK_R] elements: (first, second,
    third, start, mask) and the tile's element offsets."""
    rows = tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R)
    offs = tile_offsets(b, rows, columns, L, R)
    first, second, third, start, mask = load_row(
        U, GATE_X, GATE_A, RESET, b, rows, offs, columns, column_mask, L, GATE_MODE, HAS_RESETS,
        FULL_TILES,
    )  # fmt: skip
    return first, second, third, start, mask, offs


@triton.jit
def load_forward_tile(
    U, GATE_X, GATE_A, Y, RESET, b, tile, columns, column_mask, L, R, TILE: tl.constexpr,
    S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
):  # fmt: skip
    """The raw inputs of a tile: :func:`load_tile_gates` and the output's inputs
    (:func:`chunk.load_output_inputs`)."""
    first, second, third, start, mask, offs = load_tile_gates(
        U, GATE_X, GATE_A, RESET, b, tile, columns, column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R,
        GATE_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    y, skip_u = load_output_inputs(U, Y, offs, mask, first, GATE_MODE, OUT_MODE)
    return first, second, third, start, y, skip_u


@triton.jit
def load_backward_tile(
    U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, columns, column_mask, L, R,
    TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr, HAS_RESETS: tl.constexpr,
    FULL_TILES: tl.constexpr,
):  # fmt: skip
    """:func:`load_tile_gates` plus the output gradient of a tile (:func:`chunk.output_grad`)
    and the skip path's input."""
    first, second, third, start, mask, offs = load_tile_gates(
        U, GATE_X, GATE_A, RESET, b, tile, columns, column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R,
        GATE_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    d_out, _y, g = output_grad(Y, GRAD_OUT, offs, mask, OUT_MODE)
    skip_u = load_skip_input(U, offs, mask, first, GATE_MODE, OUT_MODE)
    return first, second, third, start, d_out, g, skip_u


@triton.jit
def tile_mask(tile, column_mask, L, TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr,
               BLOCK_R: tl.constexpr, FULL_TILES: tl.constexpr):  # fmt: skip
    """In-bounds elements of a tile (the mask :func:`chunk.load_row` used)."""
    rows = tile_rows(tile, TILE, S, SEGMENTS, BLOCK_R)
    mask = column_mask
    if not FULL_TILES:
        mask = mask & (rows < L)
    return mask


@triton.jit
def state_row(STATE, b, chunk, offs_r, col_mask, R, n_rows):
    """Pointers and mask of one [1, BLOCK_R] row of a [B, n_rows, R] fp32 state tensor."""
    return STATE + state_offsets(b, chunk, offs_r, R, n_rows)[None, :], col_mask[None, :]


@triton.jit
def program_constants(column, CHANNEL, SCALARS, R: tl.constexpr, BLOCK_R: tl.constexpr,
                      SEGMENTS: tl.constexpr, GATE_MODE: tl.constexpr,
                      OUT_MODE: tl.constexpr):  # fmt: skip
    """Channel block ``column``'s (batch row, channels [BLOCK_R], their mask), the tile
    columns' channels and mask ([1, SEGMENTS * BLOCK_R]) and :func:`chunk.channel_constants`,
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
