"""Persistent time-split programs: a fixed grid takes every block's pieces round-robin.

With ``pieces=K`` and ``programs=P`` in the geometry (``SAMU_KERNELS_TILE``), every
(batch row, channel block) is cut at the same tiles into K pieces, as ``split.py``'s block
pieces are, and the pieces are numbered piece-major (piece q of block j is item
q * n_blocks + j; the backward counts the pieces from the last). P programs, all resident
at once, take them round-robin: program p scans items p, p + P, p + 2 P, ... So the programs
running side by side scan neighbouring blocks at the same rows, the busiest program scans
cdiv(K * n_blocks, P) pieces (1.25 blocks' work for the medium reference shape's 160 blocks
on 132 programs at K = 4, where one program per block leaves some SMs two), and a piece's
carry comes from the piece before it, an item n_blocks earlier, which a program scanned a
round or more before.

Each program's tile loop runs over all its pieces' tiles at once (it carries each step's
block, rank and place in its piece as counters, ``next_step``), so the Tensor Memory
Accelerator's pipeline (``tl.range(num_stages=TILE_STAGES)``) issues the next piece's first
tiles while the current piece's last ones are computed instead of filling again at every
piece. (Each piece scanned by the whole-block tile loop instead, whose tiles compile to the
whole-block code, was 5 % slower on the medium reference shape, H100, 2026-12-07: a piece
then cost ~2 us of pipeline fill and carry wait in the forward against ~0.9 us here;
docs/performance.md, "Persistent pieces through the whole-block tile loop".) The next
piece's block constants are loaded at a piece's last tile, and the carry is awaited only
where the tile's join needs it (after its gates and segment steps); at its last tile the
state (or gradient) leaving it is published for the next piece, and the backward's parameter
partials go to their piece's row, summed once the loop is over (``chunk.finish_partials``
for each of the program's pieces). Every state and gradient is the whole-block programs',
bit for bit; the parameter gradients sum one partial row per piece.

Triton pipelines no loop that holds another loop or a ``tl.debug_barrier``; the carry's wait
is inline assembly (``summaries.wait_for_carry``), and its publication one relaxed exchange
per value with no barrier (``summaries.publish_carry``), so both sit in the tile loop.

A program waits for pieces that other programs scan, so the grid must be resident at once:
the launcher allows at most one program per multiprocessor (``launch._Geometry.of``). The
interpreter runs programs one after another, so there the launcher allows only grids where
every piece's predecessor is its own program's (P dividing the blocks) or a lower one's.
"""

import triton
import triton.language as tl

from samu_kernels.common.chunk import channel_block_start, finish_partials
from samu_kernels.common.kernels import program_lanes
from samu_kernels.common.split import (
    backward_tile_gradients,
    backward_tile_steps,
    entering_state,
    forward_tile_outputs,
    forward_tile_steps,
    leaving_state,
    piece_slot,
    store_piece_partials,
)
from samu_kernels.common.tiles import (
    load_tile_boxes,
    load_tile_rows,
    program_columns,
    program_constants,
    segment_offsets,
    segment_starts,
)


@triton.jit
def first_step(n_blocks):
    """(block, rank, within) of this program's first step, item program_id of the
    piece-major order (block fastest, rank the piece's place in the order), and (blocks_on,
    ranks_on): num_programs % n_blocks and num_programs // n_blocks, for :func:`next_step`."""
    rank = tl.program_id(0) // n_blocks
    blocks_on = tl.num_programs(0) % n_blocks
    return tl.program_id(0) - rank * n_blocks, rank, 0, blocks_on, tl.num_programs(0) // n_blocks


@triton.jit
def block_after(block, blocks_on, n_blocks):
    """(the block of the item num_programs items after one of block ``block``, whether that
    item is a rank further on than ``ranks_on`` alone gives): ``blocks_on`` is num_programs %
    n_blocks (:func:`first_step`), so no division."""
    after = block + blocks_on
    past = after >= n_blocks
    return tl.where(past, after - n_blocks, after), past


@triton.jit
def next_step(block, rank, within, tiles_per_piece, n_blocks, blocks_on, ranks_on):
    """(block, rank, within) of the step after this one: the piece's next tile, or after its
    last the first tile of the program's next item, num_programs items on. The loop carries
    these counters instead of dividing the step number twice (the divisions took ~35 SASS
    instructions a tile more), and selects, not branches, update them (a branch here moved
    the tile loads' issue to the loop's top: 2.8x slower on an H100, Triton 3.6)."""
    wrap = within == tiles_per_piece - 1
    after, past = block_after(block, blocks_on, n_blocks)
    block = tl.where(wrap, after, block)
    rank = tl.where(wrap, rank + ranks_on + past.to(tl.int32), rank)
    return block, rank, tl.where(wrap, 0, within + 1)


@triton.jit
def persistent_tile(rank, within, tiles_per_piece, n_pieces, BACKWARD: tl.constexpr):
    """(piece, tile) of the step at ``within`` of the item of rank ``rank`` (its place in the
    piece-major order; the backward's pieces from the last, its steps from the piece's last
    tile). Pieces have ``tiles_per_piece`` tiles; the last piece's past the block's end are
    all rows past L."""
    if BACKWARD:
        piece = n_pieces - 1 - rank
        tile = piece * tiles_per_piece + tiles_per_piece - 1 - within
    else:
        piece = rank
        tile = piece * tiles_per_piece + within
    return piece, tile


@triton.jit
def step_tile(
    U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, block, rank, within, tiles_per_piece, n_pieces, L,
    R: tl.constexpr, TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr,
    BLOCK_R: tl.constexpr, CHANNELS: tl.constexpr, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
    DESCRIBED: tl.constexpr, BACKWARD: tl.constexpr,
):  # fmt: skip
    """What the step at ``within`` of item (block, rank) scans: (piece, tile)
    (:func:`persistent_tile`), the block's lanes and tile columns
    (``tiles.program_columns``), its first channel and the tile's loaded rows
    (``tiles.load_tile_boxes`` where DESCRIBED, else ``tiles.load_tile_rows``; GRAD_OUT read
    only BACKWARD)."""
    piece, tile = persistent_tile(rank, within, tiles_per_piece, n_pieces, BACKWARD)
    b, offs_r, col_mask, columns, column_mask = program_columns(
        block, R, BLOCK_R, CHANNELS, SEGMENTS
    )
    column0 = channel_block_start(block, R, CHANNELS)
    if DESCRIBED:
        rows = load_tile_boxes(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, column0, L, TILE, S, SEGMENTS,
            BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, BACKWARD,
        )  # fmt: skip
    else:
        rows = load_tile_rows(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, columns, column_mask, L, R, TILE, S,
            SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES, BACKWARD,
        )  # fmt: skip
    return piece, tile, b, offs_r, col_mask, columns, column_mask, column0, rows


@triton.jit
def block_constants(block, CHANNEL, SCALARS, R: tl.constexpr, BLOCK_R: tl.constexpr,
                    CHANNELS: tl.constexpr, SEGMENTS: tl.constexpr, GATE_MODE: tl.constexpr,
                    OUT_MODE: tl.constexpr):  # fmt: skip
    """Channel block ``block``'s constants of ``tiles.program_constants``: (decay_scale,
    a_param_factor, w_a, w_x, b_a, b_x, skip, channel_decay_scale)."""
    (_b, _offs_r, _col_mask, _columns, _column_mask, decay_scale, a_param_factor, w_a, w_x, b_a,
     b_x, skip, channel_decay_scale) = program_constants(
        block, CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS, GATE_MODE, OUT_MODE
    )  # fmt: skip
    return decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip, channel_decay_scale


@triton.jit
def next_constants(constants, upcoming, block, step, within, tiles_per_piece, n_blocks,
                   blocks_on, CHANNEL, SCALARS, R: tl.constexpr, BLOCK_R: tl.constexpr,
                   CHANNELS: tl.constexpr, SEGMENTS: tl.constexpr, GATE_MODE: tl.constexpr,
                   OUT_MODE: tl.constexpr):  # fmt: skip
    """(the constants of step ``step``'s block, those of the program's next piece's block):
    ``upcoming`` becomes the constants at a piece's first step, and at its last the next
    piece's block (num_programs items on) has its constants loaded, a whole tile ahead of
    their use (:func:`block_constants`)."""
    if (within == 0) & (step > 0):
        constants = upcoming
    if within == tiles_per_piece - 1:
        upcoming = block_constants(
            block_after(block, blocks_on, n_blocks)[0], CHANNEL, SCALARS, R, BLOCK_R, CHANNELS,
            SEGMENTS, GATE_MODE, OUT_MODE,
        )  # fmt: skip
    return constants, upcoming


@triton.jit
def program_steps(n_blocks, n_pieces, tiles_per_piece):
    """The tile steps of this program: its pieces (round-robin over n_pieces * n_blocks)
    times ``tiles_per_piece``."""
    mine = tl.cdiv(n_pieces * n_blocks - tl.program_id(0), tl.num_programs(0))
    return mine * tiles_per_piece


@triton.jit
def forward_persistent_kernel(
    U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, H0, OUT, FINAL, SAVED, CARRY, L,
    R: tl.constexpr, n_chunks, n_blocks, tiles_per_piece, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, T: tl.constexpr, TILE: tl.constexpr, SEGMENTS: tl.constexpr,
    BLOCK_R: tl.constexpr, CHANNELS: tl.constexpr, SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr, HAS_H0: tl.constexpr,
    FUSED_WRITE: tl.constexpr, DESCRIBED: tl.constexpr, TILE_STAGES: tl.constexpr,
):  # fmt: skip
    """Forward of the persistent programs (arguments as ``split.forward_split_kernel``'s):
    each scans its pieces in order, their tiles in one loop. A piece enters with h0 (or
    zero) at the block's first tile, else with the carry of the piece before (CARRY
    [pieces, B, R] int64 words, zeroed, ``split.piece_slot``), and leaves its state there
    for the next piece, or in FINAL after the block's last."""
    S: tl.constexpr = TILE // SEGMENTS
    n_pieces = tl.cdiv(tl.cdiv(L, TILE), tiles_per_piece)
    constants = block_constants(
        tl.program_id(0) % n_blocks, CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS,
        GATE_MODE, OUT_MODE,
    )  # fmt: skip
    upcoming = constants
    h = tl.zeros([SEGMENTS * BLOCK_R], dtype=tl.float32)
    steps = program_steps(n_blocks, n_pieces, tiles_per_piece)
    block, rank, within, blocks_on, ranks_on = first_step(n_blocks)
    for step in tl.range(0, steps, num_stages=TILE_STAGES):
        piece, tile, b, _lanes, _lane_mask, columns, column_mask, _column0, rows = step_tile(
            U, GATE_X, GATE_A, Y, RESET, U, block, rank, within, tiles_per_piece, n_pieces, L, R,
            TILE, S, SEGMENTS, BLOCK_R, CHANNELS, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES,
            DESCRIBED, False,
        )  # fmt: skip
        constants, upcoming = next_constants(
            constants, upcoming, block, step, within, tiles_per_piece, n_blocks, blocks_on,
            CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS, GATE_MODE, OUT_MODE,
        )  # fmt: skip
        decay_scale, _a_param_factor, w_a, w_x, b_a, b_x, skip, _channel_decay_scale = constants
        starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = segment_offsets(b, starts, columns, L, R)
        a_rows, x_rows, u_rows, seg_decay, seg_h = forward_tile_steps(
            rows, starts, column_mask, L, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE, TILE, S,
            SEGMENTS, BLOCK_R, SHARED_SFU, HAS_RESETS, FULL_TILES,
        )  # fmt: skip
        if within == 0:
            carry_in = piece_slot(CARRY, tl.maximum(piece - 1, 0), n_blocks, R, CHANNELS)
            h = entering_state(H0, carry_in, b, columns, column_mask, R, piece > 0, HAS_H0, True)
        h = forward_tile_outputs(
            OUT, SAVED, rows, a_rows, x_rows, u_rows, seg_decay, seg_h, h, b, starts, offs,
            columns, column_mask, L, R, n_chunks, skip, GATE_MODE, OUT_MODE, T, TILE, S, SEGMENTS,
            BLOCK_R, FULL_TILES, FUSED_WRITE,
        )  # fmt: skip
        if within == tiles_per_piece - 1:
            leaving_state(
                FINAL, piece_slot(CARRY, piece, n_blocks, R, CHANNELS), b, columns, column_mask,
                R, piece < n_pieces - 1, h, BLOCK_R, True,
            )  # fmt: skip
        block, rank, within = next_step(
            block, rank, within, tiles_per_piece, n_blocks, blocks_on, ranks_on
        )


@triton.jit
def backward_persistent_kernel(
    U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT, GRAD_FINAL, SAVED, D_U, D_GATE_X,
    D_GATE_A, D_Y, D_H0, PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, CARRY, L,
    R: tl.constexpr, n_chunks, n_blocks, tiles_per_piece, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, T: tl.constexpr, TILE: tl.constexpr, SEGMENTS: tl.constexpr,
    BLOCK_R: tl.constexpr, CHANNELS: tl.constexpr, SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr, FUSED_WRITE: tl.constexpr,
    DESCRIBED: tl.constexpr, TILE_STAGES: tl.constexpr,
):  # fmt: skip
    """Backward of the persistent programs (arguments as ``split.backward_split_kernel``'s),
    the pieces from the last, each from its last tile: a piece enters with the final
    state's gradient at the block's last tile, else with the carry of the piece after it,
    and leaves its gradient there for the piece before, or in D_H0 at the block's first
    tile; its parameter partials go to row b * pieces + piece of PARTIAL [B * pieces, P, R]
    (``split.store_piece_partials``), summed after the loop by the program that completes a
    block's rows (``chunk.finish_partials``)."""
    S: tl.constexpr = TILE // SEGMENTS
    n_pieces = tl.cdiv(tl.cdiv(L, TILE), tiles_per_piece)
    constants = block_constants(
        tl.program_id(0) % n_blocks, CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS,
        GATE_MODE, OUT_MODE,
    )  # fmt: skip
    upcoming = constants
    zero = tl.zeros([SEGMENTS * BLOCK_R], dtype=tl.float32)
    carry = zero
    accs = (zero, zero, zero, zero, zero, zero)
    n_rows = n_blocks // tl.cdiv(R, CHANNELS) * n_pieces
    steps = program_steps(n_blocks, n_pieces, tiles_per_piece)
    block, rank, within, blocks_on, ranks_on = first_step(n_blocks)
    for step in tl.range(0, steps, num_stages=TILE_STAGES):
        piece, tile, b, offs_r, col_mask, columns, column_mask, column0, rows = step_tile(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, block, rank, within, tiles_per_piece,
            n_pieces, L, R, TILE, S, SEGMENTS, BLOCK_R, CHANNELS, GATE_MODE, OUT_MODE, HAS_RESETS,
            FULL_TILES, DESCRIBED, True,
        )  # fmt: skip
        constants, upcoming = next_constants(
            constants, upcoming, block, step, within, tiles_per_piece, n_blocks, blocks_on,
            CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS, GATE_MODE, OUT_MODE,
        )  # fmt: skip
        decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip, channel_decay_scale = constants
        starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = segment_offsets(b, starts, columns, L, R)
        gates, a_rows, g_rows, states, seg_decay, seg_c = backward_tile_steps(
            SAVED, rows, b, tile, starts, offs, column0, columns, column_mask, L, R, n_chunks,
            decay_scale, w_a, w_x, b_a, b_x, GATE_MODE, T, TILE, S, SEGMENTS, BLOCK_R,
            SHARED_SFU, HAS_RESETS, FULL_TILES, FUSED_WRITE, DESCRIBED,
        )  # fmt: skip
        if within == 0:
            carry_in = piece_slot(CARRY, tl.minimum(piece + 1, n_pieces - 1), n_blocks, R, CHANNELS)
            # c_t = a_t dL/dh_t, entering the block's last row from the final state's gradient.
            carry = entering_state(
                GRAD_FINAL, carry_in, b, columns, column_mask, R, piece < n_pieces - 1, True, True
            )
        carry, accs = backward_tile_gradients(
            D_U, D_GATE_X, D_GATE_A, D_Y, rows, gates, a_rows, g_rows, states, seg_decay, seg_c,
            carry, accs, starts, offs, column_mask, L, R, decay_scale, w_a, w_x, skip,
            GATE_MODE, OUT_MODE, TILE, S, SEGMENTS, BLOCK_R, SHARED_SFU, FULL_TILES,
        )  # fmt: skip
        if within == tiles_per_piece - 1:
            # dL/dh0 = a_0 dL/dh_0 = c_0.
            leaving_state(
                D_H0, piece_slot(CARRY, piece, n_blocks, R, CHANNELS), b, columns, column_mask, R,
                piece > 0, carry, BLOCK_R, True,
            )  # fmt: skip
            store_piece_partials(
                PARTIAL, accs, b * n_pieces + piece, offs_r, col_mask, R, a_param_factor,
                channel_decay_scale, SEGMENTS, BLOCK_R, GATE_MODE,
            )  # fmt: skip
            accs = (zero, zero, zero, zero, zero, zero)
        block, rank, within = next_step(
            block, rank, within, tiles_per_piece, n_blocks, blocks_on, ranks_on
        )
    # Summed once all this program's pieces are stored: chunk.finish_partials' loops would
    # keep the tile loop from being pipelined.
    for j in range(steps // tiles_per_piece):
        block = (tl.program_id(0) + j * tl.num_programs(0)) % n_blocks
        _b, offs_r, col_mask = program_lanes(block, R, BLOCK_R, CHANNELS)
        finish_partials(
            PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, block, 1, n_rows, offs_r, col_mask, R,
            CHANNELS, GATE_MODE, OUT_MODE,
        )  # fmt: skip
