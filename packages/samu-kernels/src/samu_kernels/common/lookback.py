"""Look-back hierarchical kernels: time split across programs, each input read once.

The three-pass hierarchical form (``kernels.py``: summaries, prefix, runs) reads every input
twice per direction. Here one launch per direction does all three: a program owns one
*part* (a tile of TILE rows, whole chunks, of one batch row and channel block; the register
tile of ``tiles.py``), and

1. loads its part, evaluates the gates and scans it from a zero start
   (:func:`tiles.scan_tile_local`), which gives the part's summary (decay product, end
   state), and publishes the summary (a flag per part raised with release semantics);
2. looks back: the state entering the part is h0 composed with the summaries of every
   earlier part. Parts are grouped in G consecutive parts (G from the backend name's
   ``grouped_prefix<G>``); the group's last part also publishes the group's summary. A
   program waits for the flags of the earlier parts of its group (all at once) and of the
   earlier groups (G at a time), and composes their summaries in a fixed order, 16 at a
   time (one ``tl.associative_scan`` over [16, BLOCK_R] each: ``summaries.look_back``);
3. enters its tile with that state (:func:`tiles.enter_tile`) and writes the outputs and
   checkpoints from registers.

The backward is the same from the last part, on the reverse scan c_t = a_t (g_t + c_{t+1})
of ``split.py``, after recomputing the part's forward states from its first checkpoint.

A program waits only for summaries, never for another program's look-back, so no wait is
longer than two publications (a part's, then its group's), whatever the number of parts;
and the summaries are composed in the same order on every call, whichever program finished
first: results are bit-reproducible (a decoupled look-back over inclusive prefixes would
not be). Programs take their part from a ticket per channel block (forward: first part
first; backward: last first), so a program waits only for parts whose programs are already
running, and the grid's order does not matter.
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
from samu_kernels.common.summaries import look_back
from samu_kernels.common.tiles import (
    enter_tile,
    load_backward_tile,
    load_forward_tile,
    program_constants,
    scan_tile,
    scan_tile_local,
    state_row,
    store_checkpoints,
    sum_segments,
    tile_mask,
    tile_offsets,
    tile_rows,
)


@triton.jit
def forward_lookback_kernel(
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
    PART_A,
    PART_X,
    GROUP_A,
    GROUP_X,
    PART_FLAG,
    GROUP_FLAG,
    TICKET,
    L,
    R: tl.constexpr,
    n_chunks,
    n_parts,
    n_groups,
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
    G: tl.constexpr,
    SCAN_ROWS: tl.constexpr,
):
    """Forward of one part (a tile of TILE rows) of one (batch row, channel block): summary,
    look-back, outputs (module docstring). Grid: channel blocks x n_parts programs; part
    summaries [B, n_parts, R] and group summaries [B, n_groups, R] fp32 scratch; TICKET
    [channel blocks] int32, zeroed."""
    S: tl.constexpr = TILE // SEGMENTS
    n_columns = tl.num_programs(0) // n_parts
    column = tl.program_id(0) % n_columns
    part = tl.atomic_add(TICKET + column, 1)
    (b, offs_r, col_mask, columns, column_mask, decay_scale, _a_param_factor, w_a, w_x, b_a, b_x,
     skip) = program_constants(column, CHANNEL, SCALARS, R, BLOCK_R, SEGMENTS, GATE_MODE,
                               OUT_MODE)  # fmt: skip
    first, second, third, start, y, skip_u = load_forward_tile(
        U, GATE_X, GATE_A, Y, RESET, b, part, columns, column_mask, L, R, TILE, S, SEGMENTS,
        BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    mask = tile_mask(part, column_mask, L, TILE, S, SEGMENTS, BLOCK_R, FULL_TILES)
    a, x, _log_a, _a2, _m, _gate_in, _gate_decay, u = gates_of_row(
        first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE,
        SHARED_SFU, HAS_RESETS,
    )  # fmt: skip
    pa, px, ea, ex, wa, wx, tile_a, tile_x = scan_tile_local(a, x, S, SEGMENTS, BLOCK_R, False)
    if HAS_H0:
        h0 = tl.load(H0 + b.to(tl.int64) * R + offs_r, mask=col_mask, other=0.0)
    else:
        h0 = tl.zeros([BLOCK_R], dtype=tl.float32)
    h = look_back(
        PART_A, PART_X, GROUP_A, GROUP_X, PART_FLAG, GROUP_FLAG, b, column, part, tile_a,
        tile_x, h0, offs_r, col_mask, R, n_parts, n_groups, G, BLOCK_R, SCAN_ROWS, False,
    )  # fmt: skip
    states, states_before = enter_tile(pa, px, ea, ex, wa, wx, h, SEGMENTS, BLOCK_R)
    rows = tile_rows(part, TILE, S, SEGMENTS, BLOCK_R)
    offs = tile_offsets(b, rows, columns, L, R)
    if FUSED_WRITE:
        store_checkpoints(SAVED, b, rows, states_before, columns, mask, R, n_chunks, T)
    else:
        tl.store(SAVED + offs, states, mask=mask)
    out = output_of(states, y, skip_u, u, skip, GATE_MODE, OUT_MODE)
    tl.store(OUT + offs, out.to(OUT.dtype.element_ty), mask=mask)
    if part == n_parts - 1:
        final_row, state_mask = state_row(FINAL, b, 0, offs_r, col_mask, R, 1)
        tl.store(final_row, tile_a * h + tile_x, mask=state_mask)


@triton.jit
def backward_lookback_kernel(
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
    PART_A,
    PART_X,
    GROUP_A,
    GROUP_X,
    PART_FLAG,
    GROUP_FLAG,
    TICKET,
    L,
    R: tl.constexpr,
    n_chunks,
    n_parts,
    n_groups,
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
    G: tl.constexpr,
    SCAN_ROWS: tl.constexpr,
):
    """Backward of one part, parts taken from the last: the part's states recomputed from
    the checkpoint of its first chunk (FUSED_WRITE) or read from SAVED, its reverse summary
    published, the look-back for the carry c = a dL/dh entering its last row from the part
    after it (the final-state gradient for the last part), the gradients of its rows; one
    row of PARTIAL [B * n_parts, slots, R] per program (row b * n_parts + part)."""
    S: tl.constexpr = TILE // SEGMENTS
    CHUNKS_PER_TILE: tl.constexpr = TILE // T
    n_columns = tl.num_programs(0) // n_parts
    column = tl.program_id(0) % n_columns
    part = n_parts - 1 - tl.atomic_add(TICKET + column, 1)
    (b, offs_r, col_mask, columns, column_mask, decay_scale, a_param_factor, w_a, w_x, b_a, b_x,
     skip) = program_constants(column, CHANNEL, SCALARS, R, BLOCK_R, SEGMENTS, GATE_MODE,
                               OUT_MODE)  # fmt: skip
    first, second, third, start, d_out, g, skip_u = load_backward_tile(
        U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, b, part, columns, column_mask, L, R, TILE, S,
        SEGMENTS, BLOCK_R, GATE_MODE, OUT_MODE, HAS_RESETS, FULL_TILES,
    )  # fmt: skip
    mask = tile_mask(part, column_mask, L, TILE, S, SEGMENTS, BLOCK_R, FULL_TILES)
    offs = tile_offsets(b, tile_rows(part, TILE, S, SEGMENTS, BLOCK_R), columns, L, R)
    a, x, log_a, a2, m, gate_in, gate_decay, u = gates_of_row(
        first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x, GATE_MODE,
        SHARED_SFU, HAS_RESETS,
    )  # fmt: skip
    # c_t = a_t dL/dh_t: the part's reverse summary first, so that it is published early.
    pa, px, ea, ex, wa, wx, tile_a, tile_x = scan_tile_local(a, a * g, S, SEGMENTS, BLOCK_R, True)
    final_row, state_mask = state_row(GRAD_FINAL, b, 0, offs_r, col_mask, R, 1)
    carry = look_back(
        PART_A, PART_X, GROUP_A, GROUP_X, PART_FLAG, GROUP_FLAG, b, column, part, tile_a,
        tile_x, tl.reshape(tl.load(final_row, mask=state_mask, other=0.0), [BLOCK_R]), offs_r,
        col_mask, R, n_parts, n_groups, G, BLOCK_R, SCAN_ROWS, True,
    )  # fmt: skip
    _c, c_next = enter_tile(pa, px, ea, ex, wa, wx, carry, SEGMENTS, BLOCK_R)
    if FUSED_WRITE:
        checkpoint, _checkpoint_mask = state_row(
            SAVED, b, part * CHUNKS_PER_TILE, offs_r, col_mask, R, n_chunks
        )
        h, _h_before, _h_leaving = scan_tile(
            a, x, tl.load(checkpoint, mask=state_mask, other=0.0), S, SEGMENTS, BLOCK_R, False
        )
    else:
        h = tl.load(SAVED + offs, mask=mask, other=0.0)
    if GATE_MODE == GATES_PRECOMPUTED and OUT_MODE == OUT_Y_H_SKIP:
        u = skip_u
    t_decay, t_wa, t_wx, t_ba, t_bx, t_logc, t_skip = input_gradients(
        D_U, D_GATE_X, D_GATE_A, D_Y, offs, mask, start, h, x, g + c_next, d_out, g, a2, m,
        gate_in, gate_decay, u, log_a, decay_scale, w_a, w_x, skip, GATE_MODE, OUT_MODE,
        SHARED_SFU,
    )  # fmt: skip
    zero = tl.zeros([SEGMENTS * BLOCK_R], dtype=tl.float32)
    s_decay, s_wa, s_wx, s_ba, s_bx, s_logc, s_skip = accumulate_terms(
        (zero, zero, zero, zero, zero, zero, zero),
        (tl.sum(t_decay, 0), tl.sum(t_wa, 0), tl.sum(t_wx, 0), tl.sum(t_ba, 0),
         tl.sum(t_bx, 0), tl.sum(t_logc, 0), tl.sum(t_skip, 0)),
        GATE_MODE,
        OUT_MODE,
    )  # fmt: skip
    store_partials(
        PARTIAL, b * n_parts + part, offs_r, col_mask, R, a_param_factor,
        sum_segments(s_decay, SEGMENTS, BLOCK_R), sum_segments(s_wa, SEGMENTS, BLOCK_R),
        sum_segments(s_wx, SEGMENTS, BLOCK_R), sum_segments(s_ba, SEGMENTS, BLOCK_R),
        sum_segments(s_bx, SEGMENTS, BLOCK_R), sum_segments(s_logc, SEGMENTS, BLOCK_R),
        sum_segments(s_skip, SEGMENTS, BLOCK_R), GATE_MODE,
    )  # fmt: skip
    if part == 0:  # dL/dh0 = a_0 dL/dh_0 = c_0
        d_h0_row, _d_h0_mask = state_row(D_H0, b, 0, offs_r, col_mask, R, 1)
        tl.store(d_h0_row, tile_a * carry + tile_x, mask=state_mask)
