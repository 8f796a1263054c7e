"""Summaries published across programs: flags, composition, and the look-back.

A program that scans part of a sequence publishes its summary (decay product, end state:
the step h -> decay h + state) and raises a flag; others wait for flags and compose the
published summaries in a fixed order (:func:`combine`), so every state is computed the same
way on every call. Used by the chained hierarchical passes (``kernels.py``: each run waits
for its neighbour) and their run look-back (``lookback=2``, :func:`look_back`: groups of run
summaries, at most two publications deep). The time-split programs' carries (``split.py``,
``persistent.py``) are published as flagged words instead (:func:`publish_carry`,
:func:`wait_for_carry`): a value and its flag in one 64-bit word, no fence.
"""

import triton
import triton.language as tl

from samu_kernels.common.chunk import COMPILED, state_offsets


@triton.jit
def combine(a1, b1, a2, b2):
    """Composition of the steps h -> a1 h + b1 then h -> a2 h + b2."""
    return a1 * a2, a2 * b1 + b2


@triton.jit
def wait_for_flag(FLAG):
    """Spin until the flag at FLAG (one int32 per run and channel block) is set, with
    acquire semantics; the barrier after it orders every thread's later loads after the
    acquire (so they see what the publisher stored before its release)."""
    while tl.atomic_add(FLAG, 0, sem="acquire") == 0:
        pass
    tl.debug_barrier()


@triton.jit
def raise_flag(FLAG):
    """Set the flag at FLAG with release semantics, after a barrier that orders every
    thread's stores of the published state before the release."""
    tl.debug_barrier()
    tl.atomic_xchg(FLAG, 1, sem="release")


RAISED: tl.constexpr = tl.constexpr(1 << 32)
"""A published carry word's flag: the high half of an int64 whose low half is the value."""

WAIT_FOR_CARRY: tl.constexpr = tl.constexpr(
    "{ .reg .pred %p; .reg .b64 %w; .reg .b32 %hi; mov.b32 $0, 0; setp.eq.s32 %p, $2, 0; "
    "@%p bra DONE; WAIT: ld.relaxed.gpu.global.b64 %w, [$1]; mov.b64 {$0, %hi}, %w; "
    "setp.eq.s32 %p, %hi, 0; @%p bra WAIT; DONE: }"
)
"""PTX of :func:`wait_for_carry`: where $2 is not 0, relaxed 64-bit loads of the word at $1
until its high half is raised, $0 its low half (0 where $2 is 0). One line: Inductor copies
kernel sources into a string literal without escaping backslashes (torch 2.11)."""


@triton.jit
def publish_carry(CARRY, state, mask):
    """Publish ``state`` (fp32) where ``mask`` in the words at CARRY (int64, zeroed): each
    word the value's bits with :data:`RAISED` above them, written by one relaxed 64-bit
    exchange, so a reader sees a value and its flag together. No barrier and no fence: the
    reader needs nothing else this program stored, so the publication waits for none of its
    other stores (a release after a barrier would wait for the whole tile's)."""
    words = state.to(tl.uint32, bitcast=True).to(tl.int64) | RAISED
    tl.atomic_xchg(CARRY, words, mask=mask, sem="relaxed")


@triton.jit
def wait_for_carry(CARRY, mask):
    """The fp32 values published at CARRY (int64 words, :func:`publish_carry`) where ``mask``
    (zeros elsewhere), each once its own word's flag is raised. Compiled, one inline-assembly
    loop of relaxed 64-bit loads per value (no Triton loop, so it may sit in the body of a
    ``tl.range(num_stages=...)`` loop, which Triton pipelines only without inner loops);
    the interpreter, which runs programs one after another, reads the words until raised."""
    if COMPILED:
        bits = tl.inline_asm_elementwise(
            WAIT_FOR_CARRY, "=r,l,r", [CARRY, mask.to(tl.int32)], dtype=tl.int32,
            is_pure=False, pack=1,
        )  # fmt: skip
    else:
        words = tl.atomic_add(CARRY, 0, mask=mask, sem="relaxed")
        while tl.sum(tl.where(mask & (words < RAISED), 1, 0), 0) > 0:
            words = tl.atomic_add(CARRY, 0, mask=mask, sem="relaxed")
        bits = tl.where(mask, words & 0xFFFFFFFF, 0).to(tl.int32)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def wait_for_flags(FLAGS, indices, valid):
    """Spin until every flag FLAGS[indices] where ``valid`` ([G]) is raised, with acquire
    semantics; the barrier after it orders every thread's later loads after the acquires."""
    pending = 1
    while pending > 0:
        flags = tl.atomic_add(FLAGS + indices, 0, mask=valid, sem="acquire")
        pending = tl.sum(tl.where(valid & (flags == 0), 1, 0), 0)
    tl.debug_barrier()


@triton.jit
def compose_published(SUM_A, SUM_X, b, n_rows, first, step, count, offs_r, col_mask, R,
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
def publish(SUM_A, SUM_X, FLAG, b, row, decay, state, offs_r, col_mask, R, n_rows):
    """Store one summary (decay, state) [BLOCK_R] as row ``row`` of SUM_A / SUM_X
    [B, n_rows, R], then raise its flag."""
    offsets = state_offsets(b, row, offs_r, R, n_rows)
    tl.store(SUM_A + offsets, decay, mask=col_mask)
    tl.store(SUM_X + offsets, state, mask=col_mask)
    raise_flag(FLAG)


@triton.jit
def look_back(RUN_A, RUN_X, GROUP_A, GROUP_X, RUN_FLAG, GROUP_FLAG, b, column, run, run_a,
              run_x, carry, offs_r, col_mask, R, n_runs, n_groups, G: tl.constexpr,
              SCAN_ROWS: tl.constexpr, REVERSE: tl.constexpr):  # fmt: skip
    """Publish run ``run``'s summary (run_a, run_x) [BLOCK_R] (and, from the group's last run
    in scan order, its group's), then return the state entering the run [BLOCK_R]: ``carry``
    [BLOCK_R] (h0, or the final-state gradient when REVERSE) composed with every earlier
    run's summary (later runs' when REVERSE), groups first, in a fixed order. Flags:
    RUN_FLAG [channel blocks, n_runs], GROUP_FLAG [channel blocks, n_groups] int32, zeroed."""
    run_flags = RUN_FLAG + column * n_runs
    group_flags = GROUP_FLAG + column * n_groups
    publish(RUN_A, RUN_X, run_flags + run, b, run, run_a, run_x, offs_r, col_mask, R, n_runs)
    k = tl.arange(0, G)
    group = run // G
    first = group * G
    last = tl.minimum(first + G, n_runs) - 1
    if REVERSE:
        step = -1
        group_start = last
        me = last - run
        n_before = n_groups - 1 - group
        groups_start = n_groups - 1
    else:
        step = 1
        group_start = first
        me = run - first
        n_before = group
        groups_start = 0
    # The earlier runs of the group (in scan order), then this run: the group's summary
    # when this run closes it.
    wait_for_flags(run_flags, group_start + step * k, k < me)
    decay, state = compose_published(
        RUN_A, RUN_X, b, n_runs, group_start, step, me, offs_r, col_mask, R, SCAN_ROWS
    )
    if me == last - first:
        group_a, group_x = combine(decay, state, run_a, run_x)
        publish(GROUP_A, GROUP_X, group_flags + group, b, group, group_a, group_x, offs_r,
                 col_mask, R, n_groups)  # fmt: skip
    # The earlier groups' summaries, then the group's earlier runs.
    for block in range(0, n_before, G):
        wait_for_flags(group_flags, groups_start + step * (block + k), block + k < n_before)
    before_a, before_x = compose_published(
        GROUP_A, GROUP_X, b, n_groups, groups_start, step, n_before, offs_r, col_mask, R,
        SCAN_ROWS,
    )  # fmt: skip
    return decay * (before_a * carry + before_x) + state
