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
   program composes the summaries of the earlier groups, G at a time, then those of the
   earlier parts of its own group, each set by one ``tl.associative_scan`` over [G, BLOCK_R]
   after waiting for all of its flags at once;
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
    state_offsets,
    store_partials,
)
from samu_kernels.common.kernels import combine, raise_flag
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
def _wait_for_flags(FLAGS, indices, valid):
    """Spin until every flag FLAGS[indices] where ``valid`` ([G]) is raised, with acquire
    semantics; the barrier after it orders every thread's later loads after the acquires."""
    pending = 1
    while pending > 0:
        flags = tl.atomic_add(FLAGS + indices, 0, mask=valid, sem="acquire")
        pending = tl.sum(tl.where(valid & (flags == 0), 1, 0), 0)
    tl.debug_barrier()


@triton.jit
def _compose_published(SUM_A, SUM_X, b, n_rows, first, step, count, offs_r, col_mask, R,
                       SCAN_ROWS: tl.constexpr):  # fmt: skip
    """The composition, in order, of ``count`` published summaries of SUM_A / SUM_X
    [B, n_rows, R] at rows first, first + step, ... (step +1 or -1): (decay, state)
    [BLOCK_R], the identity when ``count`` is 0. Folded SCAN_ROWS rows at a time (a
    ``tl.associative_scan`` over [SCAN_ROWS, BLOCK_R] each), always in the same order."""
    decay = tl.full(offs_r.shape, 1.0, tl.float32)
    state = tl.zeros(offs_r.shape, tl.float32)
    k = tl.arange(0, SCAN_ROWS)
    for block in range(0, count, SCAN_ROWS):
        rows = first + step * (block + k)
        offsets = (b.to(tl.int64) * n_rows + rows[:, None]) * R + offs_r[None, :]
        mask = (block + k < count)[:, None] & col_mask[None, :]
        block_a, block_x = tl.associative_scan(
            (
                tl.load(SUM_A + offsets, mask=mask, other=1.0),
                tl.load(SUM_X + offsets, mask=mask, other=0.0),
            ),
            0,
            combine,
        )
        at = k[:, None] == tl.minimum(count - block, SCAN_ROWS) - 1
        block_decay = tl.sum(tl.where(at, block_a, 0.0), 0)
        block_state = tl.sum(tl.where(at, block_x, 0.0), 0)
        decay, state = combine(decay, state, block_decay, block_state)
    return decay, state


@triton.jit
def _publish(SUM_A, SUM_X, FLAG, b, row, decay, state, offs_r, col_mask, R, n_rows):
    """Store one summary (decay, state) [BLOCK_R] as row ``row`` of SUM_A / SUM_X
    [B, n_rows, R], then raise its flag."""
    offsets = state_offsets(b, row, offs_r, R, n_rows)
    tl.store(SUM_A + offsets, decay, mask=col_mask)
    tl.store(SUM_X + offsets, state, mask=col_mask)
    raise_flag(FLAG)


@triton.jit
def look_back(PART_A, PART_X, GROUP_A, GROUP_X, PART_FLAG, GROUP_FLAG, b, column, part,
              tile_a, tile_x, carry, offs_r, col_mask, R, n_parts, n_groups, G: tl.constexpr,
              BLOCK_R: tl.constexpr, SCAN_ROWS: tl.constexpr,
              REVERSE: tl.constexpr):  # fmt: skip
    """Publish part ``part``'s summary (tile_a, tile_x) [1, BLOCK_R] (and, from the group's
    last part in scan order, its group's), then return the state entering the part
    [1, BLOCK_R]: ``carry`` [BLOCK_R] (h0, or the final-state gradient when REVERSE)
    composed with every earlier part's summary (later parts' when REVERSE), groups first,
    in a fixed order. Flags: PART_FLAG [channel blocks, n_parts], GROUP_FLAG
    [channel blocks, n_groups] int32, zeroed."""
    part_flags = PART_FLAG + column * n_parts
    group_flags = GROUP_FLAG + column * n_groups
    tile_a = tl.reshape(tile_a, [BLOCK_R])
    tile_x = tl.reshape(tile_x, [BLOCK_R])
    _publish(PART_A, PART_X, part_flags + part, b, part, tile_a, tile_x, offs_r, col_mask, R,
             n_parts)  # fmt: skip
    k = tl.arange(0, G)
    group = part // G
    first = group * G
    last = tl.minimum(first + G, n_parts) - 1
    if REVERSE:
        step = -1
        group_start = last
        me = last - part
        n_before = n_groups - 1 - group
        groups_start = n_groups - 1
    else:
        step = 1
        group_start = first
        me = part - first
        n_before = group
        groups_start = 0
    # The earlier parts of the group (in scan order), then this part: the group's summary
    # when this part closes it.
    _wait_for_flags(part_flags, group_start + step * k, k < me)
    decay, state = _compose_published(
        PART_A, PART_X, b, n_parts, group_start, step, me, offs_r, col_mask, R, SCAN_ROWS
    )
    if me == last - first:
        group_a, group_x = combine(decay, state, tile_a, tile_x)
        _publish(GROUP_A, GROUP_X, group_flags + group, b, group, group_a, group_x, offs_r,
                 col_mask, R, n_groups)  # fmt: skip
    # The earlier groups' summaries, then the group's earlier parts.
    for block in range(0, n_before, G):
        _wait_for_flags(group_flags, groups_start + step * (block + k), block + k < n_before)
    before_a, before_x = _compose_published(
        GROUP_A, GROUP_X, b, n_groups, groups_start, step, n_before, offs_r, col_mask, R,
        SCAN_ROWS,
    )  # fmt: skip
    entering = decay * (before_a * carry + before_x) + state
    return entering[None, :]


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
    published, the look-back for dL/dh after its last row, the gradients of its rows; one
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
