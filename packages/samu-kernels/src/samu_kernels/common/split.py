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
reversed: the tile's states are recomputed from the checkpoints of its chunks, each segment
entering with its chunk's, after its chunk's earlier segments' steps where a chunk holds
several (:func:`tiles.entering_from_checkpoints`: the forward's own FMAs, so bit for bit the
forward's states, with no join across the tile), then the
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

With ``programs=N`` in the geometry (balanced programs, an override measured slower than one
program per block: docs/performance.md, "Balanced programs, timed"), N programs each scan a
contiguous share of the blocks' tiles, a block cut between two of them handed over through a
carry published as flagged words (:func:`share_of_program`, :func:`entering_state`,
:func:`leaving_state`).
With ``pieces=K`` every block is cut at the same tiles into K pieces, one program each, the
programs taking their pieces from a ticket in piece-major order (:func:`piece_of_ticket`): the
programs running at any time scan neighbouring blocks at the same rows, and each piece's
carry comes from a program that took its ticket one whole row of pieces earlier.

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
    finish_partials,
    gates_of_row,
    input_gradients,
    output_of,
    store_partials,
)
from samu_kernels.common.summaries import publish_carry, wait_for_carry
from samu_kernels.common.tiles import (
    box_rows,
    enter_segments,
    entering_from_checkpoints,
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

# HANDOVER of the time-split kernels: how blocks are cut between programs.
WHOLE_BLOCKS: tl.constexpr = tl.constexpr(0)  # one program per block
BALANCED_SHARES: tl.constexpr = tl.constexpr(1)  # Tile.programs: shares of the blocks' tiles
BLOCK_PIECES: tl.constexpr = tl.constexpr(2)  # Tile.pieces: blocks cut at the same tiles


@triton.jit
def share_of_program(pid, n_blocks, n_tiles, BACKWARD: tl.constexpr):
    """(first block, last block, first tile, end tile) of program ``pid``'s share of the
    flattened work of a balanced launch: block-major tiles, n_blocks * n_tiles of them, cut
    into tl.num_programs(0) <= n_blocks contiguous shares, so that a share spans at least one
    block and cuts a block at most once; its tiles are [first tile, end tile) of the
    flattened order. The backward counts the shares from the end, so that in both
    directions a cut block's carry is handed from a lower program id to a higher one."""
    total = n_blocks.to(tl.int64) * n_tiles
    programs = tl.num_programs(0)
    lower = pid * total // programs
    upper = (pid + 1) * total // programs
    if BACKWARD:
        lower, upper = total - upper, total - lower
    first_block = (lower // n_tiles).to(tl.int32)
    return first_block, ((upper - 1) // n_tiles).to(tl.int32), lower, upper


@triton.jit
def piece_of(block, n_tiles, share_start, share_end):
    """The tiles [first, end) of channel block ``block`` that a share of the flattened work
    ([share_start, share_end), :func:`share_of_program`) covers."""
    first = tl.maximum(share_start - block * n_tiles, 0).to(tl.int32)
    end = tl.minimum(share_end - block * n_tiles, n_tiles).to(tl.int32)
    return first, end


@triton.jit
def piece_of_ticket(CARRY, n_blocks, n_tiles, tiles_per_piece, R: tl.constexpr,
                    CHANNELS: tl.constexpr, BACKWARD: tl.constexpr):  # fmt: skip
    """(block, piece, first tile, end tile, pieces) of the next piece of a BLOCK_PIECES launch:
    a ticket (the int64 after CARRY's [pieces, B, R] words) counted piece-major, so that a
    program only waits on a piece whose ticket was taken earlier, by a running program, and
    the programs running side by side scan neighbouring blocks at the same rows. The
    backward counts the pieces from the last."""
    n_pieces = tl.cdiv(n_tiles, tiles_per_piece)
    ticket = tl.atomic_add(piece_slot(CARRY, n_pieces, n_blocks, R, CHANNELS), 1).to(tl.int32)
    piece = ticket // n_blocks
    if BACKWARD:
        piece = n_pieces - 1 - piece
    first_tile = piece * tiles_per_piece
    end_tile = tl.minimum(first_tile + tiles_per_piece, n_tiles)
    return ticket % n_blocks, piece, first_tile, end_tile, n_pieces


@triton.jit
def piece_slot(CARRY, piece, n_blocks, R: tl.constexpr, CHANNELS: tl.constexpr):
    """The carry words [B, R] of ``piece`` in a launch's CARRY [pieces, B, R] (int64,
    :func:`summaries.publish_carry`)."""
    rows = n_blocks // tl.cdiv(R, CHANNELS)
    return CARRY + piece.to(tl.int64) * rows * R


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
    CARRY,
    L,
    R: tl.constexpr,
    n_chunks,
    n_blocks,
    tiles_per_piece,
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
    HANDOVER: tl.constexpr,
):
    """Forward of the time-split programs. With HANDOVER WHOLE_BLOCKS, program i scans
    (batch row, channel block) i: CHANNELS channels on BLOCK_R lanes, the rest masked
    (``Tile.channels``; n_blocks programs). With BALANCED_SHARES, fewer programs than blocks
    (``Tile.programs``) each scan a contiguous share of the block-major tiles
    (:func:`share_of_program`): the tail of a block whose head the previous program scans,
    whole blocks, the head of a block the next program finishes. A program scans its
    share's last block first: the head's state after its last tile is published in CARRY
    [B, R] (int64 words, zeroed; :func:`summaries.publish_carry`), and the tail, scanned
    last, waits for it (its predecessor scanned that head first, so the wait is short). With
    BLOCK_PIECES (``Tile.pieces``), each program scans one piece of ``tiles_per_piece`` tiles
    of a block (:func:`piece_of_ticket`), the state after it published in its piece's CARRY
    [pieces, B, R] (+ the ticket, zeroed) for the next piece. Every state is the one the
    whole-block program computes, bit for bit. See :func:`_forward_piece` for the scan."""
    n_tiles = tl.cdiv(L, TILE)
    if HANDOVER == BLOCK_PIECES:
        block, piece, first_tile, end_tile, _n_pieces = piece_of_ticket(
            CARRY, n_blocks, n_tiles, tiles_per_piece, R, CHANNELS, False
        )
        carry_in = piece_slot(CARRY, tl.maximum(piece - 1, 0), n_blocks, R, CHANNELS)
        carry_out = piece_slot(CARRY, piece, n_blocks, R, CHANNELS)
        _forward_piece(
            U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, H0, OUT, FINAL, SAVED, carry_in,
            carry_out, block, first_tile, end_tile, n_tiles, L, R, n_chunks, GATE_MODE, OUT_MODE,
            T, TILE, SEGMENTS, BLOCK_R, CHANNELS, SHARED_SFU, HAS_RESETS, FULL_TILES, HAS_H0,
            FUSED_WRITE, DESCRIBED, TILE_STAGES, True,
        )  # fmt: skip
    elif HANDOVER == BALANCED_SHARES:
        first_block, last_block, share_start, share_end = share_of_program(
            tl.program_id(0), n_blocks, n_tiles, False
        )
        for i in range(last_block - first_block + 1):
            block = last_block - i
            first_tile, end_tile = piece_of(block, n_tiles, share_start, share_end)
            _forward_piece(
                U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, H0, OUT, FINAL, SAVED, CARRY,
                CARRY, block, first_tile, end_tile, n_tiles, L, R, n_chunks, GATE_MODE,
                OUT_MODE, T, TILE, SEGMENTS, BLOCK_R, CHANNELS, SHARED_SFU, HAS_RESETS,
                FULL_TILES, HAS_H0, FUSED_WRITE, DESCRIBED, TILE_STAGES, True,
            )  # fmt: skip
    else:
        # One piece, no loop around the tile loop: the whole-block kernel compiles as before.
        _forward_piece(
            U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, H0, OUT, FINAL, SAVED, CARRY, CARRY,
            tl.program_id(0), 0, n_tiles, n_tiles, L, R, n_chunks, GATE_MODE, OUT_MODE, T, TILE,
            SEGMENTS, BLOCK_R, CHANNELS, SHARED_SFU, HAS_RESETS, FULL_TILES, HAS_H0, FUSED_WRITE,
            DESCRIBED, TILE_STAGES, False,
        )  # fmt: skip


@triton.jit
def _forward_piece(
    U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, H0, OUT, FINAL, SAVED, CARRY_IN, CARRY_OUT,
    block, first_tile, end_tile, n_tiles, L, R: tl.constexpr, n_chunks, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, T: tl.constexpr, TILE: tl.constexpr, SEGMENTS: tl.constexpr,
    BLOCK_R: tl.constexpr, CHANNELS: tl.constexpr, SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr, HAS_H0: tl.constexpr,
    FUSED_WRITE: tl.constexpr, DESCRIBED: tl.constexpr, TILE_STAGES: tl.constexpr,
    CUT: tl.constexpr,
):  # fmt: skip
    """Tiles [first_tile, end_tile) of (batch row, channel block) ``block``, in order, each
    cut into SEGMENTS segments scanned side by side by the program's threads
    (``launch.split_flags``); with FUSED_WRITE, the state entering every chunk goes to SAVED.
    The state entering the first tile is h0 (or zero), or with CUT and a first tile past 0
    the carry another program published for this block (CARRY_IN); the state after the last
    goes to FINAL, or with CUT and an end before the block's last tile is published in
    CARRY_OUT.
    DESCRIBED: U, GATE_X, GATE_A and Y are tensor descriptors, each tile loaded as one box
    per input, TILE_STAGES tiles in flight (``tiles.load_tile_boxes``; RESET stays a
    pointer); else pointers, the next tile's rows loaded while this one is computed."""
    S: tl.constexpr = TILE // SEGMENTS
    (b, _offs_r, _col_mask, columns, column_mask, decay_scale, _a_param_factor, w_a, w_x, b_a,
     b_x, skip, _channel_decay_scale) = program_constants(
        block, CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS, GATE_MODE, OUT_MODE
    )  # fmt: skip
    h = entering_state(H0, CARRY_IN, b, columns, column_mask, R, first_tile > 0, HAS_H0, CUT)
    column0 = channel_block_start(block, R, CHANNELS)
    if not DESCRIBED:
        # Double-buffered: tile i + 1's loads are issued before tile i is computed (the last
        # iteration reloads the last tile instead of reading past the end).
        next_rows = load_tile_rows(
            U, GATE_X, GATE_A, Y, RESET, U, b, first_tile, columns, column_mask, L, R, TILE, S,
            SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES, False,
        )  # fmt: skip
    for tile in tl.range(first_tile, end_tile, num_stages=TILE_STAGES):
        if DESCRIBED:
            rows = load_tile_boxes(
                U, GATE_X, GATE_A, Y, RESET, U, b, tile, column0, L, TILE, S, SEGMENTS,
                BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, False,
            )  # fmt: skip
        else:
            rows = next_rows
            next_rows = load_tile_rows(
                U, GATE_X, GATE_A, Y, RESET, U, b, tl.minimum(tile + 1, end_tile - 1), columns,
                column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS,
                FULL_TILES, False,
            )  # fmt: skip
        starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = segment_offsets(b, starts, columns, L, R)
        a_rows, x_rows, u_rows, seg_decay, seg_h = forward_tile_steps(
            rows, starts, column_mask, L, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE, TILE, S,
            SEGMENTS, BLOCK_R, SHARED_SFU, HAS_RESETS, FULL_TILES,
        )  # fmt: skip
        h = forward_tile_outputs(
            OUT, SAVED, rows, a_rows, x_rows, u_rows, seg_decay, seg_h, h, b, starts, offs,
            columns, column_mask, L, R, n_chunks, skip, GATE_MODE, OUT_MODE, T, TILE, S, SEGMENTS,
            BLOCK_R, FULL_TILES, FUSED_WRITE,
        )  # fmt: skip
    leaving_state(FINAL, CARRY_OUT, b, columns, column_mask, R, end_tile < n_tiles, h, BLOCK_R, CUT)


@triton.jit
def forward_tile_steps(
    rows, starts, column_mask, L, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE: tl.constexpr,
    TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr, HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
):  # fmt: skip
    """The gates of a forward tile from its loaded ``rows`` (:func:`tiles.load_tile_rows`;
    ``starts``: :func:`tiles.segment_starts`) and every segment's step: (a_rows, x_rows,
    u_rows, seg_decay, seg_h), S-tuples of [SEGMENTS * BLOCK_R] fp32 tile rows then the steps
    (:func:`tiles.segment_steps`). Nothing here needs the state entering the tile."""
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
    return a_rows, x_rows, u_rows, seg_decay, seg_h


@triton.jit
def forward_tile_outputs(
    OUT, SAVED, rows, a_rows, x_rows, u_rows, seg_decay, seg_h, h, b, starts, offs, columns,
    column_mask, L, R: tl.constexpr, n_chunks, skip, GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr, T: tl.constexpr, TILE: tl.constexpr, S: tl.constexpr,
    SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, FULL_TILES: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
):  # fmt: skip
    """A forward tile (``starts``, ``offs``: :func:`tiles.segment_starts`,
    :func:`tiles.segment_offsets`) entered with state ``h`` ([SEGMENTS * BLOCK_R], every
    segment holding it), its gates and steps from :func:`forward_tile_steps`: joins the
    segments, stores every row's output to OUT and the checkpoints (FUSED_WRITE) or every
    state to SAVED, and returns the state leaving the tile."""
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
    return h


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
    COUNTERS,
    D_CHANNEL,
    D_SCALARS,
    CARRY,
    L,
    R: tl.constexpr,
    n_chunks,
    n_blocks,
    tiles_per_piece,
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
    HANDOVER: tl.constexpr,
):
    """Backward of the time-split programs, their tiles from the last (:func:`_backward_piece`).
    With HANDOVER WHOLE_BLOCKS, program i takes (batch row, channel block) i and writes row
    i's batch row of PARTIAL [B, P, R] (like ``backward_sequential_kernel``). With
    BALANCED_SHARES, shares as the forward's (:func:`share_of_program`, counted from the
    last tile), a share's first block first: the tail of a cut block hands the gradient
    entering its first row to the head (CARRY [B, R] words, zeroed), scanned last
    by the next program; a block's partial sums go to PARTIAL [2 B, P, R] row 2 b from the
    piece that starts at its first tile, row 2 b + 1 from a tail (zeros where the block is
    whole). With BLOCK_PIECES, pieces as the forward's, the last first (:func:`piece_of_ticket`):
    a piece hands the gradient entering its first row to the piece before it through its own
    CARRY [pieces, B, R] words (+ the ticket, zeroed), and writes row
    b * pieces + piece of PARTIAL [B * pieces, P, R]. Either way the partial rows are summed
    in row order into D_CHANNEL and D_SCALARS by the programs that complete them
    (:func:`chunk.finish_partials`, COUNTERS zeroed). DESCRIBED: as the forward's, GRAD_OUT
    and (without FUSED_WRITE) SAVED too."""
    n_tiles = tl.cdiv(L, TILE)
    if HANDOVER == BLOCK_PIECES:
        block, piece, first_tile, end_tile, n_pieces = piece_of_ticket(
            CARRY, n_blocks, n_tiles, tiles_per_piece, R, CHANNELS, True
        )
        carry_in = piece_slot(CARRY, tl.minimum(piece + 1, n_pieces - 1), n_blocks, R, CHANNELS)
        carry_out = piece_slot(CARRY, piece, n_blocks, R, CHANNELS)
        _backward_piece(
            U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT, GRAD_FINAL, SAVED, D_U,
            D_GATE_X, D_GATE_A, D_Y, D_H0, PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, carry_in,
            carry_out, block, first_tile, end_tile, n_tiles, n_blocks, piece, n_pieces, L, R,
            n_chunks, GATE_MODE, OUT_MODE, T, TILE, SEGMENTS, BLOCK_R, CHANNELS, SHARED_SFU,
            HAS_RESETS, FULL_TILES, FUSED_WRITE, DESCRIBED, TILE_STAGES, BLOCK_PIECES,
        )  # fmt: skip
    elif HANDOVER == BALANCED_SHARES:
        first_block, last_block, share_start, share_end = share_of_program(
            tl.program_id(0), n_blocks, n_tiles, True
        )
        for block in range(first_block, last_block + 1):
            first_tile, end_tile = piece_of(block, n_tiles, share_start, share_end)
            _backward_piece(
                U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT, GRAD_FINAL, SAVED, D_U,
                D_GATE_X, D_GATE_A, D_Y, D_H0, PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, CARRY,
                CARRY, block, first_tile, end_tile, n_tiles, n_blocks,
                (first_tile > 0).to(tl.int32), 2, L, R, n_chunks, GATE_MODE, OUT_MODE, T, TILE,
                SEGMENTS, BLOCK_R, CHANNELS, SHARED_SFU, HAS_RESETS, FULL_TILES, FUSED_WRITE,
                DESCRIBED, TILE_STAGES, BALANCED_SHARES,
            )  # fmt: skip
    else:
        _backward_piece(
            U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT, GRAD_FINAL, SAVED, D_U,
            D_GATE_X, D_GATE_A, D_Y, D_H0, PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, CARRY, CARRY,
            tl.program_id(0), 0, n_tiles, n_tiles, n_blocks, 0, 1, L, R, n_chunks,
            GATE_MODE, OUT_MODE, T, TILE, SEGMENTS, BLOCK_R, CHANNELS, SHARED_SFU, HAS_RESETS,
            FULL_TILES, FUSED_WRITE, DESCRIBED, TILE_STAGES, WHOLE_BLOCKS,
        )  # fmt: skip


@triton.jit
def _backward_piece(
    U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT, GRAD_FINAL, SAVED, D_U, D_GATE_X,
    D_GATE_A, D_Y, D_H0, PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, CARRY_IN, CARRY_OUT, block,
    first_tile, end_tile, n_tiles, n_blocks, piece, n_pieces, L,
    R: tl.constexpr, n_chunks,
    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr, T: tl.constexpr, TILE: tl.constexpr,
    SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, CHANNELS: tl.constexpr,
    SHARED_SFU: tl.constexpr, HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
    FUSED_WRITE: tl.constexpr, DESCRIBED: tl.constexpr, TILE_STAGES: tl.constexpr,
    HANDOVER: tl.constexpr,
):  # fmt: skip
    """Tiles [first_tile, end_tile) of (batch row, channel block) ``block`` from the last,
    segments as in the forward, the states recomputed from the checkpoints of the tile's
    chunks (FUSED_WRITE). The gradient entering the last row is the final state's, or
    with a HANDOVER and an end before the block's last tile the carry another program
    published (CARRY_IN); the one leaving the first row is dL/dh0, or with a
    HANDOVER and a first tile past 0 published (CARRY_OUT) for the program
    scanning the piece before. The piece's partial sums go to row b * n_pieces + piece of
    PARTIAL and end in :func:`chunk.finish_partials` (``n_blocks``: the launch's (batch row,
    channel block) pairs)."""
    S: tl.constexpr = TILE // SEGMENTS
    CUT: tl.constexpr = HANDOVER != WHOLE_BLOCKS
    (b, offs_r, col_mask, columns, column_mask, decay_scale, a_param_factor, w_a, w_x, b_a, b_x,
     skip, channel_decay_scale) = program_constants(
        block, CHANNEL, SCALARS, R, BLOCK_R, CHANNELS, SEGMENTS, GATE_MODE, OUT_MODE
    )  # fmt: skip
    # c_t = a_t dL/dh_t, entering the last row from the final state's gradient.
    carry = entering_state(
        GRAD_FINAL, CARRY_IN, b, columns, column_mask, R, end_tile < n_tiles, True, CUT
    )
    zero = tl.zeros([SEGMENTS * BLOCK_R], dtype=tl.float32)
    accs = (zero, zero, zero, zero, zero, zero)
    column0 = channel_block_start(block, R, CHANNELS)
    if not DESCRIBED:
        next_rows = load_tile_rows(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, end_tile - 1, columns, column_mask, L, R,
            TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES, True,
        )  # fmt: skip
    for i in tl.range(first_tile, end_tile, num_stages=TILE_STAGES):
        tile = end_tile - 1 - (i - first_tile)
        if DESCRIBED:
            rows = load_tile_boxes(
                U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tile, column0, L, TILE, S,
                SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, True,
            )  # fmt: skip
        else:
            rows = next_rows
            next_rows = load_tile_rows(
                U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, tl.maximum(tile - 1, first_tile),
                columns, column_mask, L, R, TILE, S, SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE,
                HAS_RESETS, FULL_TILES, True,
            )  # fmt: skip
        starts = segment_starts(tile, TILE, S, SEGMENTS, BLOCK_R)
        offs = segment_offsets(b, starts, columns, L, R)
        gates, a_rows, g_rows, states, seg_decay, seg_c = backward_tile_steps(
            SAVED, rows, b, tile, starts, offs, column0, columns, column_mask, L, R, n_chunks,
            decay_scale, w_a, w_x, b_a, b_x, GATE_MODE, T, TILE, S, SEGMENTS, BLOCK_R,
            SHARED_SFU, HAS_RESETS, FULL_TILES, FUSED_WRITE, DESCRIBED,
        )  # fmt: skip
        carry, accs = backward_tile_gradients(
            D_U, D_GATE_X, D_GATE_A, D_Y, rows, gates, a_rows, g_rows, states, seg_decay, seg_c,
            carry, accs, starts, offs, column_mask, L, R, decay_scale, w_a, w_x, skip,
            GATE_MODE, OUT_MODE, TILE, S, SEGMENTS, BLOCK_R, SHARED_SFU, FULL_TILES,
        )  # fmt: skip
    # dL/dh0 = a_0 dL/dh_0 = c_0.
    leaving_state(D_H0, CARRY_OUT, b, columns, column_mask, R, first_tile > 0, carry, BLOCK_R, CUT)
    row = b * n_pieces + piece
    rows_written = 1
    n_rows = n_blocks // tl.cdiv(R, CHANNELS) * n_pieces
    if HANDOVER == BALANCED_SHARES:  # noqa: SIM102 (a constexpr test, then a runtime one)
        # Row 2 b: the piece from the block's first tile; 2 b + 1: a tail, or zeros where
        # the block is whole.
        if first_tile == 0 and end_tile == n_tiles:
            nothing = tl.zeros([BLOCK_R], dtype=tl.float32)
            store_partials(
                PARTIAL, row + 1, offs_r, col_mask, R, a_param_factor, channel_decay_scale,
                nothing, nothing, nothing, nothing, nothing, nothing, GATE_MODE,
            )  # fmt: skip
            rows_written = 2
    store_piece_partials(
        PARTIAL, accs, row, offs_r, col_mask, R, a_param_factor, channel_decay_scale, SEGMENTS,
        BLOCK_R, GATE_MODE,
    )  # fmt: skip
    finish_partials(
        PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, block, rows_written, n_rows, offs_r, col_mask,
        R, CHANNELS, GATE_MODE, OUT_MODE,
    )  # fmt: skip


@triton.jit
def backward_tile_steps(
    SAVED, rows, b, tile, starts, offs, column0, columns, column_mask, L, R: tl.constexpr, n_chunks,
    decay_scale, w_a, w_x, b_a, b_x, GATE_MODE: tl.constexpr, T: tl.constexpr,
    TILE: tl.constexpr, S: tl.constexpr, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr, HAS_RESETS: tl.constexpr, FULL_TILES: tl.constexpr,
    FUSED_WRITE: tl.constexpr, DESCRIBED: tl.constexpr,
):  # fmt: skip
    """The gates of backward tile ``tile`` from its loaded ``rows`` (BACKWARD
    :func:`tiles.load_tile_rows`), its states (recomputed from the checkpoints of its
    chunks with FUSED_WRITE, else the saved ones) and every segment's step of the reverse
    scan: (gates, a_rows, g_rows, states, seg_decay, seg_c), S-tuples of
    [SEGMENTS * BLOCK_R] fp32 tile rows (gates: :func:`chunk.gates_of_row`'s tuples) then the
    steps (:func:`tiles.reverse_segment_steps`). Nothing here needs the gradient entering
    the tile (``starts``, ``offs``: :func:`tiles.segment_starts`,
    :func:`tiles.segment_offsets`)."""
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
    # The tile's states: recomputed from its chunks' checkpoints, or the saved ones.
    states = ()
    if FUSED_WRITE:
        seg_decay, seg_h = segment_steps(a_rows, x_rows, S)
        entering = entering_from_checkpoints(
            SAVED, b, tile, seg_decay, seg_h, columns, column_mask, R, n_chunks, L, T, TILE, S,
            SEGMENTS, BLOCK_R,
        )  # fmt: skip
        states = states_from(entering, a_rows, x_rows, S)
    elif DESCRIBED:
        states = box_rows(SAVED, b, tile, column0, TILE, S, SEGMENTS, BLOCK_R)
    else:
        for k in tl.static_range(S):
            mask = row_mask(starts, k, column_mask, L, FULL_TILES)
            states = states + (tl.load(SAVED + offs + k * R, mask=mask, other=0.0),)  # type: ignore[assignment]  # noqa: RUF005
    seg_decay, seg_c = reverse_segment_steps(a_rows, g_rows, S)
    return gates, a_rows, g_rows, states, seg_decay, seg_c


@triton.jit
def backward_tile_gradients(
    D_U, D_GATE_X, D_GATE_A, D_Y, rows, gates, a_rows, g_rows, states, seg_decay, seg_c, carry,
    accs, starts, offs, column_mask, L, R: tl.constexpr, decay_scale, w_a, w_x, skip,
    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr, TILE: tl.constexpr, S: tl.constexpr,
    SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, SHARED_SFU: tl.constexpr,
    FULL_TILES: tl.constexpr,
):  # fmt: skip
    """A backward tile (``starts``, ``offs`` as :func:`backward_tile_steps`') entered (after
    its last row) with ``carry`` = a dL/dh
    ([SEGMENTS * BLOCK_R], every segment holding it), from :func:`backward_tile_steps`: joins
    the segments in reverse, stores every row's input gradients and adds its
    parameter-gradient terms to ``accs`` (:func:`chunk.accumulate_terms`). Returns (the
    carry leaving the tile's first row, accs)."""
    c, carry = enter_segments(seg_decay, seg_c, carry, SEGMENTS, BLOCK_R, True)
    # The rows from the last: dL/dh_k = g_k + c_{k+1}, c_k = a_k dL/dh_k.
    for k in tl.static_range(S - 1, -1, -1):
        dh = g_rows[k] + c
        c = a_rows[k] * dh
        mask = row_mask(starts, k, column_mask, L, FULL_TILES)
        _first, _second, _third, start, d_out, g, skip_u = rows[k]
        _a, x, a2, m, gate_in, gate_decay, u = gates[k]
        if GATE_MODE == GATES_PRECOMPUTED and OUT_MODE == OUT_Y_H_SKIP:
            u = skip_u
        terms = input_gradients(
            D_U, D_GATE_X, D_GATE_A, D_Y, offs + k * R, mask, start, states[k], x, dh, d_out, g,
            a2, m, gate_in, gate_decay, u, decay_scale, w_a, w_x, skip, GATE_MODE, OUT_MODE,
            SHARED_SFU,
        )  # fmt: skip
        accs = accumulate_terms(accs, terms, GATE_MODE, OUT_MODE)
    return carry, accs


@triton.jit
def store_piece_partials(
    PARTIAL, accs, row, offs_r, col_mask, R: tl.constexpr, a_param_factor, channel_decay_scale,
    SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr, GATE_MODE: tl.constexpr,
):  # fmt: skip
    """A backward piece's parameter-gradient terms ``accs`` ([SEGMENTS * BLOCK_R] each)
    summed over its segments into row ``row`` of PARTIAL (:func:`chunk.store_partials`)."""
    acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip = accs
    store_partials(
        PARTIAL, row, offs_r, col_mask, R, a_param_factor, channel_decay_scale,
        sum_segments(acc_decay, SEGMENTS, BLOCK_R), sum_segments(acc_wa, SEGMENTS, BLOCK_R),
        sum_segments(acc_wx, SEGMENTS, BLOCK_R), sum_segments(acc_ba, SEGMENTS, BLOCK_R),
        sum_segments(acc_bx, SEGMENTS, BLOCK_R), sum_segments(acc_skip, SEGMENTS, BLOCK_R),
        GATE_MODE,
    )  # fmt: skip


@triton.jit
def _start_state(START, b, columns, column_mask, R, HAS_START: tl.constexpr):
    """The [SEGMENTS * BLOCK_R] tile vector of row b of START [B, R] (fp32), or zeros."""
    state = tl.zeros(columns.shape, dtype=tl.float32)
    if HAS_START:
        state = tl.load(state_vector(START, b, 0, columns, R, 1), mask=column_mask, other=0.0)
    return state


@triton.jit
def entering_state(START, CARRY, b, columns, column_mask, R, handed_over,
                   HAS_START: tl.constexpr, CUT: tl.constexpr):  # fmt: skip
    """The state (or gradient) entering a piece, as a tile vector: row b of START [B, R]
    (h0 or the final state's gradient; zeros without HAS_START), or with CUT where
    ``handed_over`` (the piece starts where another program's ended) row b of CARRY [B, R]
    once that program has published it (:func:`summaries.wait_for_carry`)."""
    if CUT:
        if handed_over:
            state = wait_for_carry(state_vector(CARRY, b, 0, columns, R, 1), column_mask)
        else:
            state = _start_state(START, b, columns, column_mask, R, HAS_START)
    else:
        state = _start_state(START, b, columns, column_mask, R, HAS_START)
    return state


@triton.jit
def leaving_state(END, CARRY, b, columns, column_mask, R, handed_over, state,
                  BLOCK_R: tl.constexpr, CUT: tl.constexpr):  # fmt: skip
    """Store the state (or gradient) leaving a piece (a tile vector, every segment holding
    it) as row b of END [B, R] (the final state, or dL/dh0), or with CUT where
    ``handed_over`` (another program scans on from here) publish it as row b of CARRY [B, R]
    (:func:`summaries.publish_carry`)."""
    mask = first_segment(column_mask, BLOCK_R)
    if CUT:
        if handed_over:
            publish_carry(state_vector(CARRY, b, 0, columns, R, 1), state, mask)
        else:
            tl.store(state_vector(END, b, 0, columns, R, 1), state, mask=mask)
    else:
        tl.store(state_vector(END, b, 0, columns, R, 1), state, mask=mask)
