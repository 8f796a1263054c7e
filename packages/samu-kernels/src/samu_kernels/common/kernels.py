"""Triton kernels (entry points) of the chunked gated linear scan, forward and backward.

Grids: ``n_rb = cdiv(R, BLOCK_R)`` channel blocks; axis 0 of every grid is
``B * n_rb`` (batch row, channel block); the hierarchical passes add chunks on axis 1.

Forward
  * ``forward_sequential_kernel``: each program walks its chunks in order.
  * hierarchical: the chunks are cut into runs of ``chunks_per_program`` consecutive
    chunks (grid axis 1). ``run_summary_kernel`` (decay product and zero-start end state of
    every run) -> ``prefix_kernel`` (incoming state of every run) -> ``forward_runs_kernel``
    (outputs of every run from its incoming state, chunk by chunk); or, with the tile's
    ``chained`` knob, ``forward_chained_kernel``: the same in one pass, runs chained in order.
Backward (reverse time; dL/dh_t = g_t + a_{t+1} dL/dh_{t+1})
  * ``backward_sequential_kernel``: each program walks its chunks from the last.
  * hierarchical: ``reverse_run_summary_kernel`` -> ``prefix_kernel`` (REVERSE) ->
    ``backward_runs_kernel`` (each run from its last chunk); or, with the ``chained`` knob,
    ``backward_chained_kernel``: the same in one pass, runs chained from the last.

Inside a chunk every kernel walks the rows one by one on [BLOCK_R] vectors
(``chunk.py``); across chunks it carries h (forward), or dL/dh and the decay of the row
after the chunk (backward), in registers. Every loop over chunks is
``tl.range(..., num_stages=NUM_STAGES)``: a chunk's loads never depend on the carried
state. The backward kernels accumulate the parameter-gradient partials of all their rows in
registers and store them once, one row of PARTIAL per program. The sequential kernel's
program that completes a channel block's rows sums them into the parameter gradients
(``chunk.finish_partials``), so that no reduction kernel follows it; the hierarchical
passes' many short programs leave that to ``torch.sum`` (each would wait for its atomic's
answer before exiting: 3-8 % slower, measured on an H100).

``SAVED`` is either the checkpoints [B, n_chunks, R] fp32 (the incoming state of every
chunk; fused_write) or all states [B, L, R] fp32. ``SCRATCH`` [n_programs, T, BLOCK_R] fp32
(fused_write backward only) holds the recomputed states of the program's current chunk.
"""

import triton
import triton.language as tl

from samu_kernels.common.chunk import (
    PASS_BACKWARD,
    PASS_FORWARD,
    PASS_REVERSE_SUMMARY,
    PASS_SUMMARY,
    backward_chunk,
    channel_block_start,
    channel_constants,
    chunk_summary,
    finish_partials,
    forward_chunk,
    prefetch_chunk,
    reverse_chunk_summary,
    row_decay,
    row_offsets,
    state_offsets,
    store_partials,
)
from samu_kernels.common.summaries import combine, look_back, raise_flag, wait_for_flag


@triton.jit
def first_row(x, G: tl.constexpr):
    return tl.sum(tl.where(tl.arange(0, G)[:, None] == 0, x, 0.0), axis=0)


@triton.jit
def last_row(x, G: tl.constexpr):
    return tl.sum(tl.where(tl.arange(0, G)[:, None] == G - 1, x, 0.0), axis=0)


@triton.jit
def program_channels(pid, R: tl.constexpr, BLOCK_R: tl.constexpr):
    """(batch row, channels [BLOCK_R], their in-bounds mask) of program ``pid``; the mask is
    a constant when BLOCK_R divides R, so that no row pays for it."""
    return program_lanes(pid, R, BLOCK_R, BLOCK_R)


@triton.jit
def program_lanes(pid, R: tl.constexpr, BLOCK_R: tl.constexpr, CHANNELS: tl.constexpr):
    """(batch row, channels [BLOCK_R], their mask) of program ``pid`` owning CHANNELS <=
    BLOCK_R consecutive channels (cdiv(R, CHANNELS) programs per batch row): the lanes past
    CHANNELS or R are masked; the mask is a constant when CHANNELS = BLOCK_R divides R."""
    b = pid // tl.cdiv(R, CHANNELS)
    lanes = tl.arange(0, BLOCK_R)
    offs_r = channel_block_start(pid, R, CHANNELS) + lanes
    if CHANNELS == BLOCK_R and R % BLOCK_R == 0:
        col_mask = tl.full([BLOCK_R], True, tl.int1)
    elif CHANNELS == BLOCK_R:
        col_mask = offs_r < R
    else:
        col_mask = (lanes < CHANNELS) & (offs_r < R)
    return b, offs_r, col_mask


@triton.jit
def forward_sequential_kernel(
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
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    HAS_H0: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    b, offs_r, col_mask = program_channels(tl.program_id(0), R, BLOCK_R)
    decay_scale, _, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    state_row = b.to(tl.int64) * R + offs_r
    if HAS_H0:
        h = tl.load(H0 + state_row, mask=col_mask, other=0.0)
    else:
        h = tl.zeros([BLOCK_R], dtype=tl.float32)
    # The loads of a chunk do not depend on the carried state: the pipeliner issues them
    # NUM_STAGES - 1 chunks ahead.
    for chunk in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        prefetch_chunk(
            U, GATE_X, GATE_A, Y, U, b, chunk, offs_r, L, R, T, GATE_MODE,
            OUT_MODE, FULL_CHUNKS, PREFETCH, PASS_FORWARD,
        )  # fmt: skip
        h = forward_chunk(
            U,
            GATE_X,
            GATE_A,
            Y,
            RESET,
            OUT,
            SAVED,
            b,
            chunk,
            h,
            offs_r,
            col_mask,
            L,
            R,
            n_chunks,
            decay_scale,
            w_a,
            w_x,
            b_a,
            b_x,
            skip,
            GATE_MODE,
            OUT_MODE,
            T,
            UNROLL,
            SHARED_SFU,
            HAS_RESETS,
            FULL_CHUNKS,
            FUSED_WRITE,
            not FUSED_WRITE,
        )
    tl.store(FINAL + state_row, h, mask=col_mask)


@triton.jit
def _run_chunks(run, chunks_per_program, n_chunks):
    """(first chunk, one past the last chunk) of run ``run``."""
    first = run * chunks_per_program
    return first, tl.minimum(first + chunks_per_program, n_chunks)


@triton.jit
def _run_summary(
    U,
    GATE_X,
    GATE_A,
    RESET,
    b,
    first,
    last,
    offs_r,
    col_mask,
    L,
    R,
    decay_scale,
    w_a,
    w_x,
    b_a,
    b_x,
    GATE_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """(decay product, end state from zero) of chunks [first, last)."""
    run_decay = tl.full([offs_r.shape[0]], 1.0, dtype=tl.float32)
    run_state = tl.zeros([offs_r.shape[0]], dtype=tl.float32)
    for chunk in tl.range(first, last, num_stages=NUM_STAGES):
        prefetch_chunk(
            U, GATE_X, GATE_A, U, U, b, chunk, offs_r, L, R, T, GATE_MODE, 0,
            FULL_CHUNKS, PREFETCH, PASS_SUMMARY,
        )  # fmt: skip
        run_decay, run_state = chunk_summary(
            U, GATE_X, GATE_A, RESET, b, chunk, run_decay, run_state, offs_r, col_mask, L, R,
            decay_scale, w_a, w_x, b_a, b_x, GATE_MODE, T, UNROLL, SHARED_SFU, HAS_RESETS,
            FULL_CHUNKS,
        )  # fmt: skip
    return run_decay, run_state


@triton.jit
def _forward_run(
    U,
    GATE_X,
    GATE_A,
    Y,
    RESET,
    OUT,
    SAVED,
    b,
    first,
    last,
    h,
    offs_r,
    col_mask,
    L,
    R,
    n_chunks,
    decay_scale,
    w_a,
    w_x,
    b_a,
    b_x,
    skip,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """Outputs (and checkpoints or states) of chunks [first, last) from incoming state h."""
    for chunk in tl.range(first, last, num_stages=NUM_STAGES):
        prefetch_chunk(
            U, GATE_X, GATE_A, Y, U, b, chunk, offs_r, L, R, T, GATE_MODE,
            OUT_MODE, FULL_CHUNKS, PREFETCH, PASS_FORWARD,
        )  # fmt: skip
        h = forward_chunk(
            U, GATE_X, GATE_A, Y, RESET, OUT, SAVED, b, chunk, h, offs_r, col_mask, L, R,
            n_chunks, decay_scale, w_a, w_x, b_a, b_x, skip, GATE_MODE, OUT_MODE, T, UNROLL,
            SHARED_SFU, HAS_RESETS, FULL_CHUNKS, FUSED_WRITE, not FUSED_WRITE,
        )  # fmt: skip


@triton.jit
def run_summary_kernel(
    U,
    GATE_X,
    GATE_A,
    CHANNEL,
    SCALARS,
    RESET,
    SUM_A,
    SUM_B,
    L,
    R: tl.constexpr,
    n_chunks,
    chunks_per_program,
    n_runs,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """Summary of a run of chunks: s -> SUM_A s + SUM_B (decay product, end state from 0)."""
    b, offs_r, col_mask = program_channels(tl.program_id(0), R, BLOCK_R)
    decay_scale, _, w_a, w_x, b_a, b_x, _ = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    first, last = _run_chunks(tl.program_id(1), chunks_per_program, n_chunks)
    run_decay, run_state = _run_summary(
        U, GATE_X, GATE_A, RESET, b, first, last, offs_r, col_mask, L, R, decay_scale, w_a, w_x,
        b_a, b_x, GATE_MODE, T, UNROLL, SHARED_SFU, HAS_RESETS, FULL_CHUNKS, NUM_STAGES, PREFETCH,
    )  # fmt: skip
    offs = state_offsets(b, tl.program_id(1), offs_r, R, n_runs)
    tl.store(SUM_A + offs, run_decay, mask=col_mask)
    tl.store(SUM_B + offs, run_state, mask=col_mask)


@triton.jit
def prefix_kernel(
    SUM_A,
    SUM_B,
    INIT,
    CARRY,
    FINAL,
    R: tl.constexpr,
    n_summaries,
    G: tl.constexpr,
    BLOCK_R: tl.constexpr,
    HAS_INIT: tl.constexpr,
    REVERSE: tl.constexpr,
):
    """Carry the state across run summaries s_c -> A_c s + B_c, G summaries at a time
    (an associative scan inside each group, a sequential carry across groups).

    Forward: CARRY[b, c] = state entering run c (INIT or 0 for c = 0), FINAL = end state.
    Reverse: CARRY[b, c] = dL/dh at run c+1's first row (INIT or 0 for the last run).
    """
    b, offs_r, col_mask = program_channels(tl.program_id(0), R, BLOCK_R)
    if HAS_INIT:
        carry = tl.load(INIT + b.to(tl.int64) * R + offs_r, mask=col_mask, other=0.0)
    else:
        carry = tl.zeros([BLOCK_R], dtype=tl.float32)
    n_groups = tl.cdiv(n_summaries, G)
    for k in range(n_groups):
        start = (n_groups - 1 - k) * G if REVERSE else k * G
        c = start + tl.arange(0, G)
        offs = (b.to(tl.int64) * n_summaries + c)[:, None] * R + offs_r[None, :]
        mask = (c < n_summaries)[:, None] & col_mask[None, :]
        decay = tl.load(SUM_A + offs, mask=mask, other=1.0)
        end_state = tl.load(SUM_B + offs, mask=mask, other=0.0)
        if REVERSE:
            decay_cum, state_cum = tl.associative_scan((decay, end_state), 0, combine, reverse=True)
            states = decay_cum * carry[None, :] + state_cum
            # states[i] is dL/dh at chunk c_i's first row: the carry of chunk c_i - 1.
            tl.store(
                CARRY + offs - R,
                states,
                mask=((c >= 1) & (c - 1 < n_summaries))[:, None] & col_mask[None, :],
            )
            last = start + G - 1
            tl.store(
                CARRY + state_offsets(b, last, offs_r, R, n_summaries),
                carry,
                mask=col_mask & (offs_r * 0 + last < n_summaries),
            )
            carry = first_row(states, G)
        else:
            decay_cum, state_cum = tl.associative_scan((decay, end_state), 0, combine)
            states = decay_cum * carry[None, :] + state_cum
            # states[i] is the state after chunk c_i: the incoming state of chunk c_i + 1.
            tl.store(
                CARRY + offs + R, states, mask=(c + 1 < n_summaries)[:, None] & col_mask[None, :]
            )
            tl.store(CARRY + state_offsets(b, start, offs_r, R, n_summaries), carry, mask=col_mask)
            carry = last_row(states, G)
    if not REVERSE:
        tl.store(FINAL + b.to(tl.int64) * R + offs_r, carry, mask=col_mask)


@triton.jit
def forward_runs_kernel(
    U,
    GATE_X,
    GATE_A,
    Y,
    CHANNEL,
    SCALARS,
    RESET,
    CARRY,
    OUT,
    SAVED,
    L,
    R: tl.constexpr,
    n_chunks,
    chunks_per_program,
    n_runs,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """Outputs of a run of chunks from the state entering it (CARRY [B, n_runs, R])."""
    b, offs_r, col_mask = program_channels(tl.program_id(0), R, BLOCK_R)
    decay_scale, _, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    first, last = _run_chunks(tl.program_id(1), chunks_per_program, n_chunks)
    h = tl.load(
        CARRY + state_offsets(b, tl.program_id(1), offs_r, R, n_runs), mask=col_mask, other=0.0
    )
    _forward_run(
        U, GATE_X, GATE_A, Y, RESET, OUT, SAVED, b, first, last, h, offs_r, col_mask, L, R,
        n_chunks, decay_scale, w_a, w_x, b_a, b_x, skip, GATE_MODE, OUT_MODE, T, UNROLL,
        SHARED_SFU, HAS_RESETS, FULL_CHUNKS, FUSED_WRITE, NUM_STAGES, PREFETCH,
    )  # fmt: skip


@triton.jit
def forward_chained_kernel(
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
    RUN_DECAY,
    RUN_END,
    GROUP_DECAY,
    GROUP_STATE,
    FLAG,
    GROUP_FLAG,
    TICKET,
    L,
    R: tl.constexpr,
    n_chunks,
    chunks_per_program,
    n_runs,
    n_groups,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    HAS_H0: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
    LOOK_BACK: tl.constexpr,
    G: tl.constexpr,
    SCAN_ROWS: tl.constexpr,
):
    """The hierarchical forward in one pass: runs chained in order.

    A program takes the next run of its channel block from a ticket (so it waits only on
    runs already running), composes the run's summary, waits for the previous run's end
    state (RUN_END [B, n_runs, R], published by raising its flag in FLAG [channel blocks,
    n_runs], zeroed), publishes its own end state, then walks the run again from its
    incoming state writing outputs (the run's inputs come back from L2). Every state is
    computed in the same order on every call: bit-reproducible, unlike a decoupled
    look-back.

    With LOOK_BACK, a run looks back instead (``summaries.look_back``): it publishes its
    summary (RUN_DECAY, and in RUN_END [B, n_runs, R] its end state from a zero start, not
    from its entering state; FLAG per run; groups of G runs publish
    theirs in GROUP_DECAY, GROUP_STATE [B, n_groups, R], GROUP_FLAG [channel blocks,
    n_groups], zeroed) and composes those of the earlier runs, so that no run waits for a
    chain of others.
    """
    column = tl.program_id(0)
    b, offs_r, col_mask = program_channels(column, R, BLOCK_R)
    run = tl.atomic_add(TICKET + column, 1)
    decay_scale, _, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    first, last = _run_chunks(run, chunks_per_program, n_chunks)
    run_decay, run_state = _run_summary(
        U, GATE_X, GATE_A, RESET, b, first, last, offs_r, col_mask, L, R, decay_scale, w_a, w_x,
        b_a, b_x, GATE_MODE, T, UNROLL, SHARED_SFU, HAS_RESETS, FULL_CHUNKS, NUM_STAGES, PREFETCH,
    )  # fmt: skip
    if LOOK_BACK:
        if HAS_H0:
            h0 = tl.load(H0 + b.to(tl.int64) * R + offs_r, mask=col_mask, other=0.0)
        else:
            h0 = tl.zeros([BLOCK_R], dtype=tl.float32)
        h = look_back(
            RUN_DECAY, RUN_END, GROUP_DECAY, GROUP_STATE, FLAG, GROUP_FLAG, b, column, run,
            run_decay, run_state, h0, offs_r, col_mask, R, n_runs, n_groups, G, SCAN_ROWS, False,
        )  # fmt: skip
        end_state = run_decay * h + run_state
    else:
        if run == 0:
            if HAS_H0:
                h = tl.load(H0 + b.to(tl.int64) * R + offs_r, mask=col_mask, other=0.0)
            else:
                h = tl.zeros([BLOCK_R], dtype=tl.float32)
        else:
            previous = state_offsets(b, run - 1, offs_r, R, n_runs)
            wait_for_flag(FLAG + column * n_runs + run - 1)
            h = tl.load(RUN_END + previous, mask=col_mask, other=0.0)
        mine = state_offsets(b, run, offs_r, R, n_runs)
        end_state = run_decay * h + run_state
        tl.store(RUN_END + mine, end_state, mask=col_mask)
        raise_flag(FLAG + column * n_runs + run)
    if run == n_runs - 1:
        tl.store(FINAL + b.to(tl.int64) * R + offs_r, end_state, mask=col_mask)
    _forward_run(
        U, GATE_X, GATE_A, Y, RESET, OUT, SAVED, b, first, last, h, offs_r, col_mask, L, R,
        n_chunks, decay_scale, w_a, w_x, b_a, b_x, skip, GATE_MODE, OUT_MODE, T, UNROLL,
        SHARED_SFU, HAS_RESETS, FULL_CHUNKS, FUSED_WRITE, NUM_STAGES, PREFETCH,
    )  # fmt: skip


@triton.jit
def _scratch_rows(SCRATCH, pid, T: tl.constexpr, BLOCK_R: tl.constexpr):
    """This program's [T, BLOCK_R] rows of SCRATCH (flat program id ``pid``)."""
    return SCRATCH + pid.to(tl.int64) * (T * BLOCK_R)


@triton.jit
def backward_sequential_kernel(
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
    SCRATCH,
    D_U,
    D_GATE_X,
    D_GATE_A,
    D_Y,
    D_H0,
    PARTIAL,
    COUNTERS,
    D_CHANNEL,
    D_SCALARS,
    L,
    R: tl.constexpr,
    n_chunks,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    pid = tl.program_id(0)
    b, offs_r, col_mask = program_channels(pid, R, BLOCK_R)
    decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    scratch = _scratch_rows(SCRATCH, pid, T, BLOCK_R)
    state_row = b.to(tl.int64) * R + offs_r
    dh = tl.load(GRAD_FINAL + state_row, mask=col_mask, other=0.0)
    # The row after the last chunk is past the end: the identity decay.
    a_next = tl.full([BLOCK_R], 1.0, dtype=tl.float32)
    zero = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc_decay = zero
    acc_wa = zero
    acc_wx = zero
    acc_ba = zero
    acc_bx = zero
    acc_skip = zero
    for i in tl.range(0, n_chunks, num_stages=NUM_STAGES):
        prefetch_chunk(
            U, GATE_X, GATE_A, Y, GRAD_OUT, b, n_chunks - 1 - i, offs_r, L, R, T,
            GATE_MODE, OUT_MODE, FULL_CHUNKS, PREFETCH, PASS_BACKWARD,
        )  # fmt: skip
        dh, a_next, accs = backward_chunk(
            U,
            GATE_X,
            GATE_A,
            Y,
            RESET,
            GRAD_OUT,
            SAVED,
            scratch,
            D_U,
            D_GATE_X,
            D_GATE_A,
            D_Y,
            b,
            n_chunks - 1 - i,
            dh,
            a_next,
            (acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip),
            offs_r,
            col_mask,
            L,
            R,
            n_chunks,
            decay_scale,
            w_a,
            w_x,
            b_a,
            b_x,
            skip,
            GATE_MODE,
            OUT_MODE,
            T,
            UNROLL,
            BLOCK_R,
            SHARED_SFU,
            HAS_RESETS,
            FULL_CHUNKS,
            FUSED_WRITE,
        )
        acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip = accs
    # dL/dh0 = a_0 dL/dh_0.
    tl.store(D_H0 + state_row, a_next * dh, mask=col_mask)
    store_partials(
        PARTIAL,
        b,
        offs_r,
        col_mask,
        R,
        a_param_factor,
        decay_scale,
        acc_decay,
        acc_wa,
        acc_wx,
        acc_ba,
        acc_bx,
        acc_skip,
        GATE_MODE,
    )
    finish_partials(
        PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, pid, 1,
        tl.num_programs(0) // tl.cdiv(R, BLOCK_R), offs_r, col_mask, R, BLOCK_R, GATE_MODE,
        OUT_MODE,
    )  # fmt: skip


@triton.jit
def _reverse_run_summary(
    U,
    GATE_A,
    Y,
    GRAD_OUT,
    RESET,
    b,
    first,
    last,
    offs_r,
    col_mask,
    L,
    R,
    decay_scale,
    w_a,
    b_a,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """(decay product, dL/dh at the first row from a zero carry) of chunks [first, last),
    walked from the last row."""
    a_next = row_decay(
        U, GATE_A, RESET, b, last * T, row_offsets(b, last * T, offs_r, L, R), offs_r, col_mask,
        L, decay_scale, w_a, b_a, GATE_MODE, HAS_RESETS,
    )  # fmt: skip
    run_decay = tl.full([offs_r.shape[0]], 1.0, dtype=tl.float32)
    run_grad = tl.zeros([offs_r.shape[0]], dtype=tl.float32)
    for i in tl.range(0, last - first, num_stages=NUM_STAGES):
        prefetch_chunk(
            U, GATE_A, GATE_A, Y, GRAD_OUT, b, last - 1 - i, offs_r, L, R, T,
            GATE_MODE, OUT_MODE, FULL_CHUNKS, PREFETCH, PASS_REVERSE_SUMMARY,
        )  # fmt: skip
        a_next, run_decay, run_grad = reverse_chunk_summary(
            U, GATE_A, Y, GRAD_OUT, RESET, b, last - 1 - i, a_next, run_decay, run_grad,
            offs_r, col_mask, L, R, decay_scale, w_a, b_a, GATE_MODE, OUT_MODE, T, UNROLL,
            SHARED_SFU, HAS_RESETS, FULL_CHUNKS,
        )  # fmt: skip
    return run_decay, run_grad


@triton.jit
def reverse_run_summary_kernel(
    U,
    GATE_A,
    Y,
    CHANNEL,
    SCALARS,
    RESET,
    GRAD_OUT,
    SUM_A,
    SUM_B,
    L,
    R: tl.constexpr,
    n_chunks,
    chunks_per_program,
    n_runs,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """Reverse summary of a run: dL/dh at its first row = SUM_A carry + SUM_B, where carry
    is dL/dh at the next run's first row. The run is walked from its last row."""
    b, offs_r, col_mask = program_channels(tl.program_id(0), R, BLOCK_R)
    decay_scale, _, w_a, _, b_a, _, _ = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    first, last = _run_chunks(tl.program_id(1), chunks_per_program, n_chunks)
    run_decay, run_grad = _reverse_run_summary(
        U, GATE_A, Y, GRAD_OUT, RESET, b, first, last, offs_r, col_mask, L, R, decay_scale, w_a,
        b_a, GATE_MODE, OUT_MODE, T, UNROLL, SHARED_SFU, HAS_RESETS, FULL_CHUNKS, NUM_STAGES,
        PREFETCH,
    )  # fmt: skip
    offs = state_offsets(b, tl.program_id(1), offs_r, R, n_runs)
    tl.store(SUM_A + offs, run_decay, mask=col_mask)
    tl.store(SUM_B + offs, run_grad, mask=col_mask)


@triton.jit
def _backward_run(
    U,
    GATE_X,
    GATE_A,
    Y,
    CHANNEL,
    SCALARS,
    RESET,
    GRAD_OUT,
    SAVED,
    SCRATCH,
    D_U,
    D_GATE_X,
    D_GATE_A,
    D_Y,
    D_H0,
    PARTIAL,
    b,
    offs_r,
    col_mask,
    run,
    program,
    dh,
    L,
    R,
    n_chunks,
    chunks_per_program,
    n_runs,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """Backward of run ``run``, last chunk first, from ``dh`` (dL/dh at the next run's first
    row); stores the input gradients, dL/dh0 (run 0) and one PARTIAL row. ``program`` is the
    flat index of this program's SCRATCH rows."""
    decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    scratch = _scratch_rows(SCRATCH, program, T, BLOCK_R)
    zero = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc_decay = zero
    acc_wa = zero
    acc_wx = zero
    acc_ba = zero
    acc_bx = zero
    acc_skip = zero
    first, last = _run_chunks(run, chunks_per_program, n_chunks)
    a_next = row_decay(
        U, GATE_A, RESET, b, last * T, row_offsets(b, last * T, offs_r, L, R), offs_r, col_mask,
        L, decay_scale, w_a, b_a, GATE_MODE, HAS_RESETS,
    )  # fmt: skip
    for i in tl.range(0, last - first, num_stages=NUM_STAGES):
        prefetch_chunk(
            U, GATE_X, GATE_A, Y, GRAD_OUT, b, last - 1 - i, offs_r, L, R, T,
            GATE_MODE, OUT_MODE, FULL_CHUNKS, PREFETCH, PASS_BACKWARD,
        )  # fmt: skip
        dh, a_next, accs = backward_chunk(
            U, GATE_X, GATE_A, Y, RESET, GRAD_OUT, SAVED, scratch, D_U, D_GATE_X, D_GATE_A, D_Y,
            b, last - 1 - i, dh, a_next,
            (acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip), offs_r, col_mask, L,
            R, n_chunks, decay_scale, w_a, w_x, b_a, b_x, skip, GATE_MODE, OUT_MODE, T, UNROLL,
            BLOCK_R, SHARED_SFU, HAS_RESETS, FULL_CHUNKS, FUSED_WRITE,
        )  # fmt: skip
        acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip = accs
    # The run that starts at chunk 0 ends with dL/dh0 = a_0 dL/dh_0.
    tl.store(
        D_H0 + b.to(tl.int64) * R + offs_r, a_next * dh, mask=col_mask & (offs_r * 0 + run == 0)
    )
    store_partials(
        PARTIAL, b * n_runs + run, offs_r, col_mask, R, a_param_factor, decay_scale, acc_decay,
        acc_wa, acc_wx, acc_ba, acc_bx, acc_skip, GATE_MODE,
    )  # fmt: skip


@triton.jit
def backward_runs_kernel(
    U,
    GATE_X,
    GATE_A,
    Y,
    CHANNEL,
    SCALARS,
    RESET,
    GRAD_OUT,
    CARRY,
    SAVED,
    SCRATCH,
    D_U,
    D_GATE_X,
    D_GATE_A,
    D_Y,
    D_H0,
    PARTIAL,
    L,
    R: tl.constexpr,
    n_chunks,
    chunks_per_program,
    n_runs,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """Backward of a run of chunks, last chunk first, from CARRY [B, n_runs, R] (dL/dh at
    the next run's first row); one row of PARTIAL per program."""
    b, offs_r, col_mask = program_channels(tl.program_id(0), R, BLOCK_R)
    run = tl.program_id(1)
    dh = tl.load(CARRY + state_offsets(b, run, offs_r, R, n_runs), mask=col_mask, other=0.0)
    _backward_run(
        U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT, SAVED, SCRATCH, D_U,
        D_GATE_X, D_GATE_A, D_Y, D_H0, PARTIAL, b, offs_r, col_mask, run,
        run * tl.num_programs(0) + tl.program_id(0), dh, L, R, n_chunks, chunks_per_program,
        n_runs, GATE_MODE, OUT_MODE, T, UNROLL, BLOCK_R, SHARED_SFU, HAS_RESETS, FULL_CHUNKS,
        FUSED_WRITE, NUM_STAGES, PREFETCH,
    )  # fmt: skip


@triton.jit
def backward_chained_kernel(
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
    SCRATCH,
    D_U,
    D_GATE_X,
    D_GATE_A,
    D_Y,
    D_H0,
    PARTIAL,
    RUN_DECAY,
    RUN_GRAD,
    GROUP_DECAY,
    GROUP_STATE,
    FLAG,
    GROUP_FLAG,
    TICKET,
    L,
    R: tl.constexpr,
    n_chunks,
    chunks_per_program,
    n_runs,
    n_groups,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    PREFETCH: tl.constexpr,
    LOOK_BACK: tl.constexpr,
    G: tl.constexpr,
    SCAN_ROWS: tl.constexpr,
):
    """The hierarchical backward in one pass: runs chained from the last.

    Tickets hand out the runs last first; a program composes its run's reverse summary,
    waits for the next run's dL/dh at its first row (RUN_GRAD [B, n_runs, R], flagged in
    FLAG [channel blocks, n_runs], zeroed; GRAD_FINAL for the last run), publishes its
    own, then runs the backward of its run from that carry. Bit-reproducible like the
    chained forward; with LOOK_BACK, a run looks back over the later runs' reverse summaries
    instead (as the forward does).
    """
    column = tl.program_id(0)
    b, offs_r, col_mask = program_channels(column, R, BLOCK_R)
    run = n_runs - 1 - tl.atomic_add(TICKET + column, 1)
    decay_scale, _, w_a, _, b_a, _, _ = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    first, last = _run_chunks(run, chunks_per_program, n_chunks)
    run_decay, run_grad = _reverse_run_summary(
        U, GATE_A, Y, GRAD_OUT, RESET, b, first, last, offs_r, col_mask, L, R, decay_scale, w_a,
        b_a, GATE_MODE, OUT_MODE, T, UNROLL, SHARED_SFU, HAS_RESETS, FULL_CHUNKS, NUM_STAGES,
        PREFETCH,
    )  # fmt: skip
    if LOOK_BACK:
        final = tl.load(GRAD_FINAL + b.to(tl.int64) * R + offs_r, mask=col_mask, other=0.0)
        carry = look_back(
            RUN_DECAY, RUN_GRAD, GROUP_DECAY, GROUP_STATE, FLAG, GROUP_FLAG, b, column, run,
            run_decay, run_grad, final, offs_r, col_mask, R, n_runs, n_groups, G, SCAN_ROWS, True,
        )  # fmt: skip
    else:
        if run == n_runs - 1:
            carry = tl.load(GRAD_FINAL + b.to(tl.int64) * R + offs_r, mask=col_mask, other=0.0)
        else:
            following = state_offsets(b, run + 1, offs_r, R, n_runs)
            wait_for_flag(FLAG + column * n_runs + run + 1)
            carry = tl.load(RUN_GRAD + following, mask=col_mask, other=0.0)
        mine = state_offsets(b, run, offs_r, R, n_runs)
        tl.store(RUN_GRAD + mine, run_decay * carry + run_grad, mask=col_mask)
        raise_flag(FLAG + column * n_runs + run)
    _backward_run(
        U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT, SAVED, SCRATCH, D_U,
        D_GATE_X, D_GATE_A, D_Y, D_H0, PARTIAL, b, offs_r, col_mask, run,
        run * tl.num_programs(0) + column, carry, L, R, n_chunks, chunks_per_program, n_runs,
        GATE_MODE, OUT_MODE, T, UNROLL, BLOCK_R, SHARED_SFU, HAS_RESETS, FULL_CHUNKS, FUSED_WRITE,
        NUM_STAGES, PREFETCH,
    )  # fmt: skip
