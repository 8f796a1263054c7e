"""Row-level Triton pieces of the chunked gated linear scan (used by ``kernels.py``).

A program owns BLOCK_R channels of one batch row and walks a chunk of T time steps row by
row: every value is a 1-D [BLOCK_R] fp32 vector, each thread owns its channels, and the
recurrence h = a h + x is one FMA per row with no communication between threads. The rows
of a chunk are unrolled ``UNROLL`` at a time (``tl.static_range``; the tile's ``unroll``
capped at T) inside a rolled loop over the T / UNROLL blocks of rows. Every block loads all
its rows before its first store (:func:`load_block`): a store may alias a later load, so
the compiler never hoists a load above one, and interleaved rows would each wait for DRAM.

Constexpr switches shared by all pieces:

* ``GATE_MODE``: how (a_t, x_t) of h_t = a_t h_{t-1} + x_t are obtained.
  ``GATES_PRECOMPUTED`` loads x (fp32, from ``GATE_X``) and log_a (fp32, -inf at a reset,
  from ``GATE_A``); ``GATES_RGLRU`` computes them from RG-LRU's gate logits (``GATE_X``,
  ``GATE_A``), ``u`` and ``a_param``; ``GATES_SAMU`` computes them from ``u`` with SAMU's
  coordinate-wise controller.
* ``OUT_MODE``: the output written in the compute dtype: h, y*h, or y*(h + skip*u).
* ``SHARED_SFU``: a^2 as a*a and 1 - a^2 as -expm1(2 log_a) (a polynomial near 0), and the
  sqrt's derivative from the sqrt itself (1 / m); otherwise the transcendentals are
  evaluated as written (exp(2 log_a), a separate rsqrt of 1 - a^2). In both, every sigmoid
  costs one exp and one reciprocal and its derivative s (1 - s) none.
  ``SHARED_SFU`` = :data:`SFU_TANH_SIGMOIDS` (the time-split kernels' launch, for 16-bit
  inputs under FAST_MATH unless ``SAMU_KERNELS_TANH_SIGMOID=0``; H100, 2026-12-05: 3-10 %
  faster) also takes each gate's sigmoid from one ``tanh.approx.f32``
  (:func:`tanh_approx`): 4 MUFU instructions per element forward instead of 6; the 1/2 of
  0.5 + 0.5 tanh(l / 2) folded into the logits' constants, log2(a) one FMA of the decay
  gate's tanh, and 1 - a^2 to the 16-bit inputs' accuracy (:func:`_squared_decay`): 6
  instructions per element fewer forward, 5 backward (sm_90 SASS).
* ``HAS_RESETS``: document starts (decay 0, multiplier 1) from ``RESET`` [B, L] uint8.
* ``FULL_CHUNKS``: L is a multiple of T, so every row of every chunk is in the sequence and
  the rows need no bounds mask (8-10 % of the hierarchical passes' SASS on sm_90); the one
  row past a run, whose decay :func:`row_decay` reads, is still checked.

One module-level switch, read when the kernels are imported:

* ``FAST_MATH`` (on by default in compiled kernels; ``SAMU_KERNELS_FAST_MATH=0`` turns it
  off): the per-row exponentials and reciprocals are the flush-to-zero approximations, one
  MUFU instruction each (libdevice's exp2, ``rcp.approx.ftz``), instead of ``tl.exp``'s and
  the division's guarded forms (which rescale around denormal and huge arguments: 5 and 9
  SASS instructions on sm_90). Exponentials are taken base 2 with log2(e) folded into the
  channel constants (SAMU's gate weights and biases, the decay scale).
  The results differ only where those guards act (denormal outputs become 0) and by the
  approximations' 2 ulp; on the H200 both forms pass the same fp64-reference tests (the
  reference-file rows at the reference shapes and every fused_write backend of the GPU
  matrix), and flush-to-zero is 3-34 % faster. The interpreter has no libdevice, so there
  the switch is always off.
"""

import math
import os

import triton
import triton.language as tl
from triton.language.extra import libdevice

FAST_MATH_ENV = "SAMU_KERNELS_FAST_MATH"
"""Environment variable that turns :data:`FAST_MATH` off ("0") or on ("1", the default),
read at import."""
TANH_SIGMOID_ENV = "SAMU_KERNELS_TANH_SIGMOID"
"""Environment variable that turns :data:`TANH_SIGMOID` off ("0") or on ("1", the default),
read at import."""


def _switch_on(name: str) -> bool:
    """Whether the on/off environment switch ``name`` is on: "1" or unset; "0" is off, any
    other value a ValueError naming it."""
    value = os.environ.get(name, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1 (unset: 1), got {value!r}")
    return value == "1"


INLINE_ASSEMBLY = os.environ.get("TRITON_INTERPRET") != "1"
"""Whether the kernels are compiled (the interpreter runs no inline assembly and has no
libdevice: no L2 prefetch and no flush-to-zero transcendentals there)."""
COMPILED: tl.constexpr = tl.constexpr(INLINE_ASSEMBLY)
FAST_MATH: tl.constexpr = tl.constexpr(_switch_on(FAST_MATH_ENV) and INLINE_ASSEMBLY)
TANH_SIGMOID = bool(FAST_MATH) and _switch_on(TANH_SIGMOID_ENV)
"""Whether the time-split kernels take the gates' sigmoids from one ``tanh.approx`` each
(``SHARED_SFU`` = :data:`SFU_TANH_SIGMOIDS`) for 16-bit inputs (see the module docstring)."""
SFU_TANH_SIGMOIDS: tl.constexpr = tl.constexpr(2)
LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)


def _one_minus_exp2_twice_coefficient(k: int) -> tl.constexpr:
    # 1 - 2^(2t) = -expm1(z) with z = 2 ln(2) t = -z sum_k z^k / (k+1)! = t sum_k q_k t^k.
    two_ln2 = 2.0 * math.log(2.0)
    return tl.constexpr(-two_ln2 * two_ln2**k / math.factorial(k + 1))


# Degree 5 and |z| < 0.3: truncation under 2e-7 relative (the first dropped term, z^6 / 7!),
# and 1 - a*a beyond it amplifies a's relative error at most 2 a^2 / (1 - a^2) = 5.7 times
# (about 1e-6 relative in fp32 with a 2-ulp exponential).
_Q0 = _one_minus_exp2_twice_coefficient(0)
_Q1 = _one_minus_exp2_twice_coefficient(1)
_Q2 = _one_minus_exp2_twice_coefficient(2)
_Q3 = _one_minus_exp2_twice_coefficient(3)
_Q4 = _one_minus_exp2_twice_coefficient(4)
_Q5 = _one_minus_exp2_twice_coefficient(5)
_POLYNOMIAL_FROM: tl.constexpr = tl.constexpr(-0.3 / (2.0 * math.log(2.0)))
# The 16-bit inputs' form (SFU_TANH_SIGMOIDS): degree 2 and t > -1/32 (|z| < 0.044), the
# truncation under 4e-6 relative (z^3 / 24) and 1 - a*a beyond it amplifying a's 2-ulp
# error at most 2 a^2 / (1 - a^2) = 45 times (5.4e-6): m = sqrt(1 - a^2) within 3e-6, under
# the tanh sigmoids' own error (2.5e-4 absolute in the gate) and bf16's rounding (2^-9).
_SHORT_POLYNOMIAL_FROM: tl.constexpr = tl.constexpr(-1.0 / 32.0)

GATES_PRECOMPUTED: tl.constexpr = tl.constexpr(0)
GATES_RGLRU: tl.constexpr = tl.constexpr(1)
GATES_SAMU: tl.constexpr = tl.constexpr(2)

OUT_H: tl.constexpr = tl.constexpr(0)
OUT_Y_H: tl.constexpr = tl.constexpr(1)
OUT_Y_H_SKIP: tl.constexpr = tl.constexpr(2)

RGLRU_LOG_DECAY_SCALE: tl.constexpr = tl.constexpr(8.0)
# d/dz sqrt(z) is clipped to 1 / sqrt(max(4 z, 1e-6)) = 1 / (2 max(sqrt(z), 5e-4)) (the
# reference's bound): 1 / m is taken of m = sqrt(1 - a^2) floored at MIN_SQRT (1 - a^2 at
# MIN_ONE_MINUS_A2).
MIN_ONE_MINUS_A2: tl.constexpr = tl.constexpr(2.5e-7)
MIN_SQRT: tl.constexpr = tl.constexpr(5e-4)


@triton.jit
def row_exp2(x):
    """2^x of a per-row value (flush-to-zero MUFU form under FAST_MATH)."""
    return libdevice.exp2(x) if FAST_MATH else tl.exp2(x)


@triton.jit
def row_exp(x):
    """exp(x) of a per-row value (flush-to-zero MUFU form under FAST_MATH)."""
    return row_exp2(x * LOG2E)


@triton.jit
def reciprocal(x):
    """1 / x of a per-row value (under FAST_MATH ``rcp.approx.ftz``, one MUFU instruction:
    libdevice's fast division adds a multiply by 1 that flushes denormals)."""
    if FAST_MATH:
        result = tl.inline_asm_elementwise(
            "rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        result = 1.0 / x
    return result


@triton.jit
def sigmoid_of_log2(z):
    """sigmoid(z ln 2): the sigmoid of a logit given in log2 units (z = logit * log2(e)), so
    that the exponential is a bare 2^-z. As 1 / (1 + 2^-z) it is accurate to a few ulp
    everywhere (2^-z overflows to inf, giving 0, where the sigmoid is below 2^-128), and
    its derivative s (1 - s) needs no second transcendental."""
    return reciprocal(1.0 + row_exp2(-z))


@triton.jit
def sigmoid(z):
    """sigmoid(z) (see :func:`sigmoid_of_log2`)."""
    return sigmoid_of_log2(z * LOG2E)


@triton.jit
def tanh_approx(z):
    """tanh(z) through ``tanh.approx.f32``: one MUFU instruction, relative error ~2^-11, so
    a sigmoid 0.5 + 0.5 tanh(l / 2) is within ~2.5e-4 absolute, under a bf16 input's own
    rounding for logits past 0.1 in size. The interpreter runs no inline assembly: there it
    is 1 - 2 / (1 + e^(2z)) in fp32, so that its tests run the forms built on it."""
    if COMPILED:
        result = tl.inline_asm_elementwise(
            "tanh.approx.f32 $0, $1;", "=r,r", [z], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        result = 1.0 - 2.0 / (1.0 + tl.exp(2.0 * z))
    return result


@triton.jit
def _log1p(e):
    # Goldberg: log(1 + e) = log(w) * e / (w - 1) with w = 1 + e rounded; exact near 0.
    w = 1.0 + e
    return tl.where(w == 1.0, e, tl.log(w) * (e / (w - 1.0)))


@triton.jit
def _softplus(p):
    return tl.maximum(p, 0.0) + _log1p(tl.exp(-tl.abs(p)))


@triton.jit
def _one_minus_exp2_twice(t, exp2_t):
    """1 - 2^(2t) for t <= 0 given 2^t: a polynomial in t near 0 (where 1 - a*a would
    cancel), 1 - a*a (one FMA) elsewhere."""
    p = _Q4 + t * _Q5
    p = _Q3 + t * p
    p = _Q2 + t * p
    p = _Q1 + t * p
    p = _Q0 + t * p
    return tl.where(t > _POLYNOMIAL_FROM, t * p, 1.0 - exp2_t * exp2_t)


@triton.jit
def _one_minus_exp2_twice_short(t, exp2_t):
    """:func:`_one_minus_exp2_twice` to the 16-bit inputs' accuracy (``_SHORT_POLYNOMIAL_FROM``):
    t times a polynomial of degree 2 over a shorter range, three instructions fewer."""
    p = _Q1 + t * _Q2
    p = _Q0 + t * p
    return tl.where(t > _SHORT_POLYNOMIAL_FROM, t * p, 1.0 - exp2_t * exp2_t)


@triton.jit
def _squared_decay(log2_a, a, SHARED_SFU: tl.constexpr):
    """(a^2, 1 - a^2) of a decay a = 2^log2_a: with SHARED_SFU a*a and a polynomial near
    a = 1 (the short one for :data:`SFU_TANH_SIGMOIDS`), else a second exponential."""
    if SHARED_SFU == SFU_TANH_SIGMOIDS:
        a2 = a * a
        one_minus_a2 = _one_minus_exp2_twice_short(log2_a, a)
    elif SHARED_SFU:
        a2 = a * a
        one_minus_a2 = _one_minus_exp2_twice(log2_a, a)
    else:
        a2 = row_exp2(2.0 * log2_a)
        one_minus_a2 = 1.0 - a2
    return a2, one_minus_a2


@triton.jit
def gate_logit(loaded, u, w, b, GATE_MODE: tl.constexpr, SCALE: tl.constexpr):
    """A gate's logit times ``SCALE``: RG-LRU's loaded logits or SAMU's w u + b, the factor
    folded into SAMU's constants (which the compiler hoists out of the row loops). log2(e)
    gives :func:`sigmoid_of_log2`'s units, 1/2 :func:`tanh_approx`'s argument."""
    return loaded * SCALE if GATE_MODE == GATES_RGLRU else (w * SCALE) * u + b * SCALE


@triton.jit
def log2_decay(decay_scale, gate_decay):
    """log2(a) = log_a * log2(e) with log_a = decay_scale * gate_decay (the scale's factor
    hoisted out of the row loops)."""
    return (decay_scale * LOG2E) * gate_decay


@triton.jit
def channel_constants(
    CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr
):
    """Per-program constants for channels ``offs_r``.

    Returns (decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip) with
    log_a = decay_scale * gate_decay and d(decay_scale)/d(a_param) = decay_scale's factor
    ``a_param_factor`` (so d a_param = a_param_factor * sum(d log_a * gate_decay)).
    """
    zero = tl.zeros([offs_r.shape[0]], dtype=tl.float32)
    decay_scale = zero
    a_param_factor = zero
    w_a = zero
    w_x = zero
    b_a = 0.0
    b_x = 0.0
    skip = 0.0
    if GATE_MODE == GATES_PRECOMPUTED:
        if OUT_MODE == OUT_Y_H_SKIP:
            skip = tl.load(SCALARS + 3)
    elif GATE_MODE == GATES_RGLRU:
        a_param = tl.load(CHANNEL + offs_r, mask=col_mask, other=0.0)
        decay_scale = -RGLRU_LOG_DECAY_SCALE * _softplus(a_param)
        a_param_factor = -RGLRU_LOG_DECAY_SCALE * sigmoid(a_param)
    else:
        a_param = tl.load(CHANNEL + offs_r, mask=col_mask, other=0.0)
        w_a = tl.load(CHANNEL + R + offs_r, mask=col_mask, other=0.0)
        w_x = tl.load(CHANNEL + 2 * R + offs_r, mask=col_mask, other=0.0)
        b_a = tl.load(SCALARS)
        b_x = tl.load(SCALARS + 1)
        scale = -tl.exp(tl.load(SCALARS + 2))
        skip = tl.load(SCALARS + 3)
        decay_scale = scale * _softplus(a_param)
        a_param_factor = scale * sigmoid(a_param)
    return decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip


@triton.jit
def row_offsets(b, t, offs_r, L, R):
    """int64 element offsets of row ``t`` (a scalar time step) of batch row ``b`` in a
    [B, L, R] tensor, channels ``offs_r`` [BLOCK_R].

    The rows of an unrolled block are addressed from their first row's offsets plus
    ``k * R``: R is a constexpr of every kernel, so that term is a constant that folds into
    the loads' and stores' immediate offsets, and a row costs no 64-bit address arithmetic
    per tensor (-18 % SASS in RG-LRU's run summary pass, sm_90)."""
    return (b.to(tl.int64) * L + t) * R + offs_r


@triton.jit
def state_offsets(b, chunk, offs_r, R, n_chunks):
    """int64 offsets of one [BLOCK_R] row of a [B, n_chunks, R] state tensor."""
    return (b.to(tl.int64) * n_chunks + chunk) * R + offs_r


@triton.jit
def channel_block_start(pid, R: tl.constexpr, CHANNELS: tl.constexpr):
    """First channel of program ``pid``'s block: every kernel's axis-0 program id is its
    batch row times cdiv(R, CHANNELS) plus its channel block of CHANNELS channels (BLOCK_R,
    or fewer in time-split programs)."""
    return (pid % tl.cdiv(R, CHANNELS)) * CHANNELS


PASS_SUMMARY: tl.constexpr = tl.constexpr(0)
PASS_FORWARD: tl.constexpr = tl.constexpr(1)
PASS_REVERSE_SUMMARY: tl.constexpr = tl.constexpr(2)
PASS_BACKWARD: tl.constexpr = tl.constexpr(3)
L2_LINE_BYTES: tl.constexpr = tl.constexpr(128)


@triton.jit
def _prefetch_l2(pointers):
    """Ask L2 for the lines at ``pointers`` (``prefetch.global.L2``; nothing comes back).

    The two PTX statements are separated by a space, not an escaped newline: Inductor copies
    a kernel's source into the module it generates, and an escaped newline in a string there
    became a real one (a SyntaxError when ``torch.compile`` loaded that module)."""
    tl.inline_asm_elementwise(
        "prefetch.global.L2 [$1]; mov.u32 $0, 0;",
        "=r,l",
        [pointers],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _prefetch_chunk_rows(
    PTR, b, chunk, offs_r, L, R: tl.constexpr, T: tl.constexpr, FULL_CHUNKS: tl.constexpr
):
    """Prefetch into L2 the T rows of chunk ``chunk`` (clamped to the sequence) of PTR
    [B, L, R] at the program's channels ``offs_r``: one request per 128-byte line per row."""
    BLOCK_R: tl.constexpr = offs_r.shape[0]
    line: tl.constexpr = L2_LINE_BYTES // (PTR.dtype.element_ty.primitive_bitwidth // 8)
    lines: tl.constexpr = (BLOCK_R + line - 1) // line
    first = channel_block_start(tl.program_id(0), R, BLOCK_R)
    columns = tl.minimum(first + tl.arange(0, lines) * line, R - 1)
    t0 = tl.minimum(tl.maximum(chunk, 0), tl.cdiv(L, T) - 1) * T
    offs0 = row_offsets(b, t0, columns, L, R)
    for k in tl.static_range(T):
        if FULL_CHUNKS:
            _prefetch_l2(PTR + offs0 + k * R)
        else:
            _prefetch_l2(PTR + row_offsets(b, tl.minimum(t0 + k, L - 1), columns, L, R))


@triton.jit
def prefetch_chunk(
    U, GATE_X, GATE_A, Y, GRAD_OUT, b, chunk, offs_r, L, R: tl.constexpr, T: tl.constexpr,
    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr, FULL_CHUNKS: tl.constexpr,
    PREFETCH: tl.constexpr, PASS: tl.constexpr,
):  # fmt: skip
    """Prefetch into L2 the [B, L, R] inputs pass ``PASS`` will read PREFETCH chunks past the
    current chunk ``chunk`` in its walk (later in time for the forward passes, earlier for the
    reverse ones), so that its loads, when the walk reaches them, wait for L2 instead of
    DRAM; nothing when PREFETCH is 0. Inputs the pass does not read may be any pointer.

    The row walk has no other way to overlap a chunk's DRAM latency with the previous
    chunk's arithmetic: its loads come first in each block of rows, and a register copy of
    the next chunk would double the registers. Passes: PASS_SUMMARY (the gate inputs),
    PASS_FORWARD (+ y, and u for the skip term of precomputed gates), PASS_REVERSE_SUMMARY
    (the decay input, dL/dout and y), PASS_BACKWARD (all of them)."""
    if PREFETCH > 0:
        chunk += PREFETCH if PASS <= PASS_FORWARD else -PREFETCH
        _prefetch_pass_inputs(
            U, GATE_X, GATE_A, Y, GRAD_OUT, b, chunk, offs_r, L, R, T, GATE_MODE, OUT_MODE,
            FULL_CHUNKS, PASS,
        )  # fmt: skip


@triton.jit
def _prefetch_pass_inputs(
    U, GATE_X, GATE_A, Y, GRAD_OUT, b, chunk, offs_r, L, R: tl.constexpr, T: tl.constexpr,
    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr, FULL_CHUNKS: tl.constexpr,
    PASS: tl.constexpr,
):  # fmt: skip
    """:func:`prefetch_chunk`'s requests for chunk ``chunk`` itself."""
    if PASS != PASS_REVERSE_SUMMARY:
        if GATE_MODE != GATES_SAMU:
            _prefetch_chunk_rows(GATE_X, b, chunk, offs_r, L, R, T, FULL_CHUNKS)
        if GATE_MODE != GATES_PRECOMPUTED or (PASS != PASS_SUMMARY and OUT_MODE == OUT_Y_H_SKIP):
            _prefetch_chunk_rows(U, b, chunk, offs_r, L, R, T, FULL_CHUNKS)
    elif GATE_MODE == GATES_SAMU:
        _prefetch_chunk_rows(U, b, chunk, offs_r, L, R, T, FULL_CHUNKS)
    if GATE_MODE != GATES_SAMU:
        _prefetch_chunk_rows(GATE_A, b, chunk, offs_r, L, R, T, FULL_CHUNKS)
    if PASS != PASS_SUMMARY and OUT_MODE != OUT_H:
        _prefetch_chunk_rows(Y, b, chunk, offs_r, L, R, T, FULL_CHUNKS)
    if PASS >= PASS_REVERSE_SUMMARY:
        _prefetch_chunk_rows(GRAD_OUT, b, chunk, offs_r, L, R, T, FULL_CHUNKS)


@triton.jit
def row_valid(t, offs_r, L):
    """[BLOCK_R] bool: row ``t`` is inside the sequence (a vector: the interpreter mishandles
    scalar masks)."""
    return offs_r * 0 + t < L


@triton.jit
def row_is_start(RESET, b, t, offs_r, L, HAS_RESETS: tl.constexpr):
    """[BLOCK_R] bool: True where row ``t`` starts a document (one scalar flag, broadcast)."""
    if HAS_RESETS:
        flag = tl.load(RESET + b.to(tl.int64) * L + tl.minimum(t, L - 1))
        start = row_valid(t, offs_r, L) & ((offs_r * 0 + flag) != 0)
    else:
        start = tl.full(offs_r.shape, False, tl.int1)
    return start


@triton.jit
def _decay_gate(U, GATE_A, offs, mask, w_a, b_a, GATE_MODE: tl.constexpr):
    """(gate_decay, u) of a row; u is loaded for SAMU only (zeros otherwise)."""
    if GATE_MODE == GATES_RGLRU:
        first = tl.load(GATE_A + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.zeros_like(first)
    else:
        u = tl.load(U + offs, mask=mask, other=0.0).to(tl.float32)
        first = u
    return sigmoid_of_log2(gate_logit(first, u, w_a, b_a, GATE_MODE, LOG2E)), u


@triton.jit
def row_decay(
    U,
    GATE_A,
    RESET,
    b,
    t,
    offs,
    offs_r,
    col_mask,
    L,
    decay_scale,
    w_a,
    b_a,
    GATE_MODE: tl.constexpr,
    HAS_RESETS: tl.constexpr,
):
    """The decay a [BLOCK_R] of row ``t`` at element offsets ``offs`` (:func:`row_offsets`;
    1 past the end of the sequence: the identity)."""
    valid = row_valid(t, offs_r, L)
    mask = col_mask & valid
    if GATE_MODE == GATES_PRECOMPUTED:
        a = row_exp(tl.load(GATE_A + offs, mask=mask, other=0.0))
    else:
        gate_decay, _ = _decay_gate(U, GATE_A, offs, mask, w_a, b_a, GATE_MODE)
        a = row_exp2(log2_decay(decay_scale, gate_decay))
    if HAS_RESETS:
        a = tl.where(row_is_start(RESET, b, t, offs_r, L, HAS_RESETS), 0.0, a)
    return tl.where(valid, a, 1.0)


@triton.jit
def load_row(
    U,
    GATE_X,
    GATE_A,
    RESET,
    b,
    t,
    offs,
    offs_r,
    col_mask,
    L,
    GATE_MODE: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
):
    """The raw inputs of row ``t`` (element offsets ``offs``, :func:`row_offsets`) as fp32
    [BLOCK_R] vectors, for :func:`gates_of_row`.

    Returns (first, second, third, start, mask): precomputed gates (log_a, x, 0); RG-LRU
    (decay-gate logits, u, input-gate logits); SAMU (u, 0, 0); start the document start flag
    (broadcast) and mask the in-bounds channels. Loading is kept apart from arithmetic so
    that a block of rows issues all its loads before any store (a store may alias a later
    load, so the compiler never hoists loads above one).
    """
    mask = col_mask if FULL_CHUNKS else col_mask & row_valid(t, offs_r, L)
    start = row_is_start(RESET, b, t, offs_r, L, HAS_RESETS)
    first, second, third = load_gate_inputs(U, GATE_X, GATE_A, offs, mask, GATE_MODE)
    return first, second, third, start, mask


@triton.jit
def load_gate_inputs(U, GATE_X, GATE_A, offs, mask, GATE_MODE: tl.constexpr):
    """The raw inputs at element offsets ``offs`` (any shape) as fp32, for
    :func:`gates_of_row`: precomputed gates (log_a, x, 0); RG-LRU (decay-gate logits, u,
    input-gate logits); SAMU (u, 0, 0)."""
    if GATE_MODE == GATES_PRECOMPUTED:
        first = tl.load(GATE_A + offs, mask=mask, other=0.0)
        second = tl.load(GATE_X + offs, mask=mask, other=0.0)
        third = tl.zeros_like(first)
    elif GATE_MODE == GATES_RGLRU:
        first = tl.load(GATE_A + offs, mask=mask, other=0.0).to(tl.float32)
        second = tl.load(U + offs, mask=mask, other=0.0).to(tl.float32)
        third = tl.load(GATE_X + offs, mask=mask, other=0.0).to(tl.float32)
    else:
        first = tl.load(U + offs, mask=mask, other=0.0).to(tl.float32)
        second = tl.zeros_like(first)
        third = second
    return first, second, third


@triton.jit
def load_block(
    U,
    GATE_X,
    GATE_A,
    RESET,
    b,
    t0,
    offs0,
    offs_r,
    col_mask,
    L,
    R,
    UNROLL: tl.constexpr,
    GATE_MODE: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
):
    """:func:`load_row` of rows t0 .. t0 + UNROLL - 1 (``offs0``: row t0's
    :func:`row_offsets`, which the caller reuses for the block's stores): a tuple of UNROLL
    row tuples, every load issued before the caller's first store."""
    rows = ()
    for k in tl.static_range(UNROLL):
        # Triton's frontend builds tuples with +, not with unpacking.
        rows = rows + (  # type: ignore[assignment]  # noqa: RUF005
            load_row(U, GATE_X, GATE_A, RESET, b, t0 + k, offs0 + k * R, offs_r, col_mask, L,
                     GATE_MODE, HAS_RESETS, FULL_CHUNKS),
        )  # fmt: skip
    return rows


@triton.jit
def gates_of_row(
    first,
    second,
    third,
    start,
    mask,
    decay_scale,
    w_a,
    w_x,
    b_a,
    b_x,
    GATE_MODE: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
):
    """(a, x) of a row from its :func:`load_row` values, and what the backward reuses.

    Returns (a, x, a2, m, gate_in, gate_decay, u): a and x are the step's decay and input
    (identity a = 1, x = 0 outside the sequence), a2 = a^2 before the reset, m = sqrt(1 -
    a^2) (1 at a document start), gate_in/gate_decay the sigmoid gates and u the input
    (zeros in the precomputed mode).
    """
    if GATE_MODE == GATES_PRECOMPUTED:
        log_a = first
        x = second
        a = row_exp(log_a)
        zero = tl.zeros_like(x)
        a2 = zero
        m = zero
        gate_in = zero
        gate_decay = zero
        u = zero
    else:
        u = second if GATE_MODE == GATES_RGLRU else first
        if SHARED_SFU == SFU_TANH_SIGMOIDS:
            # sigmoid(l) = 0.5 + 0.5 tanh(l / 2), the 1/2 folded into the logit's constants
            # and log2(a) = decay_scale log2(e) gate_decay as one FMA of tanh.
            tanh_decay = tanh_approx(gate_logit(first, u, w_a, b_a, GATE_MODE, 0.5))
            tanh_in = tanh_approx(gate_logit(third, u, w_x, b_x, GATE_MODE, 0.5))
            gate_decay = 0.5 * tanh_decay + 0.5
            gate_in = 0.5 * tanh_in + 0.5
            half_log2_scale = decay_scale * (0.5 * LOG2E)
            log2_a = tanh_decay * half_log2_scale + half_log2_scale
        else:
            gate_decay = sigmoid_of_log2(gate_logit(first, u, w_a, b_a, GATE_MODE, LOG2E))
            gate_in = sigmoid_of_log2(gate_logit(third, u, w_x, b_x, GATE_MODE, LOG2E))
            log2_a = log2_decay(decay_scale, gate_decay)
        a = row_exp2(log2_a)
        a2, one_minus_a2 = _squared_decay(log2_a, a, SHARED_SFU)
        m = tl.sqrt(one_minus_a2)
        if HAS_RESETS:
            m = tl.where(start, 1.0, m)
            a = tl.where(start, 0.0, a)
        x = m * (gate_in * u)
    a = tl.where(mask, a, 1.0)
    x = tl.where(mask, x, 0.0)
    return a, x, a2, m, gate_in, gate_decay, u


@triton.jit
def output_grad(Y, GRAD_OUT, offs, mask, OUT_MODE: tl.constexpr):
    """(dL/dout, y, g = dL/dh through the output) of a row, fp32."""
    d_out = tl.load(GRAD_OUT + offs, mask=mask, other=0.0).to(tl.float32)
    if OUT_MODE == OUT_H:
        y = d_out
        g = d_out
    else:
        y = tl.load(Y + offs, mask=mask, other=0.0).to(tl.float32)
        g = d_out * y
    return d_out, y, g


@triton.jit
def load_skip_input(U, offs, mask, fallback, GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr):
    """u of a row (fp32) for the skip term y*(h + skip*u) when the gates are precomputed (the
    gate modes load u themselves); ``fallback``, any loaded row value, otherwise."""
    skip_u = fallback
    if OUT_MODE == OUT_Y_H_SKIP and GATE_MODE == GATES_PRECOMPUTED:
        skip_u = tl.load(U + offs, mask=mask, other=0.0).to(tl.float32)
    return skip_u


@triton.jit
def load_output_inputs(U, Y, offs, mask, first, GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr):
    """(y, u for the skip term) of a row, fp32, where the output mode needs them (``first``,
    any loaded row value, stands in otherwise): y for y*h and y*(h + skip*u); u as in
    :func:`load_skip_input`."""
    y = first
    if OUT_MODE != OUT_H:
        y = tl.load(Y + offs, mask=mask, other=0.0).to(tl.float32)
    return y, load_skip_input(U, offs, mask, first, GATE_MODE, OUT_MODE)


@triton.jit
def output_of(h, y, skip_u, u, skip, GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr):
    """The output written for states ``h`` (any shape, fp32): h, y*h or y*(h + skip*u), with
    u the loaded ``skip_u`` when the gates are precomputed (:func:`load_output_inputs`)."""
    out = h
    if OUT_MODE == OUT_Y_H_SKIP:
        if GATE_MODE == GATES_PRECOMPUTED:
            u = skip_u
        out = y * (h + skip * u)
    elif OUT_MODE == OUT_Y_H:
        out = y * h
    return out


@triton.jit
def input_gradients(
    D_U,
    D_GATE_X,
    D_GATE_A,
    D_Y,
    offs,
    mask,
    start,
    h,
    x,
    dh,
    d_out,
    g,
    a2,
    m,
    gate_in,
    gate_decay,
    u,
    decay_scale,
    w_a,
    w_x,
    skip,
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    SHARED_SFU: tl.constexpr,
):
    """Store the input gradients of rows (any shape of elements at ``offs``) given dL/dh_t
    ``dh``, the state ``h``, the output gradient ``d_out`` and ``g`` (dL/dh through the
    output) and the gates of :func:`gates_of_row` (``u``: the skip input in the precomputed
    mode); return the parameter-gradient terms (decay, w_a, w_x, b_a, b_x, skip),
    for :func:`accumulate_terms` (a mode's unused terms are ``dh`` placeholders; log_c's
    is decay_scale times the decay term's and w_a's and b_a's lack the factor decay_scale,
    applied to the sums by :func:`store_partials`)."""
    t_decay = dh
    t_wa = dh
    t_wx = dh
    t_ba = dh
    t_bx = dh
    t_skip = dh
    if OUT_MODE == OUT_Y_H_SKIP:
        tl.store(D_Y + offs, (d_out * (h + skip * u)).to(D_Y.dtype.element_ty), mask=mask)
        t_skip = g * u
    elif OUT_MODE == OUT_Y_H:
        tl.store(D_Y + offs, (d_out * h).to(D_Y.dtype.element_ty), mask=mask)
    if GATE_MODE == GATES_PRECOMPUTED:
        # Through the decay: d log_a = dh * a * h_{t-1} = dh * (h - x).
        tl.store(D_GATE_X + offs, dh, mask=mask)
        tl.store(D_GATE_A + offs, tl.where(mask, dh * (h - x), 0.0), mask=mask)
        if OUT_MODE == OUT_Y_H_SKIP:
            tl.store(D_U + offs, (g * skip).to(D_U.dtype.element_ty), mask=mask)
    else:
        # x = m gate_in u with m = sqrt(1 - a^2), dm/dlog_a = -a^2 / m: d log_a = dh ((h - x)
        # - gate_in u a^2 / m). (Folded into dh (h - gate_in u / m) it cancels where a is
        # small: h ~ x, and 1 / m's rounding is then all of the result's error.)
        if SHARED_SFU:
            inverse_m = reciprocal(tl.maximum(m, MIN_SQRT))
        else:
            inverse_m = tl.rsqrt(tl.maximum(1.0 - a2, MIN_ONE_MINUS_A2))
        d_log_a = tl.where(mask & (~start), dh * ((h - x) - (gate_in * u) * a2 * inverse_m), 0.0)
        d_gate_in_logit = (dh * x) * (1.0 - gate_in)
        # dL/d(decay logit) over decay_scale (a per-channel factor applied where it is used).
        decay_slope = d_log_a * (gate_decay - gate_decay * gate_decay)
        d_u = (dh * m) * gate_in
        t_decay = d_log_a * gate_decay
        if GATE_MODE == GATES_RGLRU:
            tl.store(D_GATE_X + offs, d_gate_in_logit.to(D_GATE_X.dtype.element_ty), mask=mask)
            tl.store(
                D_GATE_A + offs,
                (decay_slope * decay_scale).to(D_GATE_A.dtype.element_ty),
                mask=mask,
            )
        else:
            d_u += decay_slope * (decay_scale * w_a) + d_gate_in_logit * w_x
            t_wa = decay_slope * u
            t_wx = d_gate_in_logit * u
            t_ba = decay_slope
            t_bx = d_gate_in_logit
        if OUT_MODE == OUT_Y_H_SKIP:
            d_u += g * skip
        tl.store(D_U + offs, d_u.to(D_U.dtype.element_ty), mask=mask)
    return t_decay, t_wa, t_wx, t_ba, t_bx, t_skip


@triton.jit
def accumulate_terms(accs, terms, GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr):
    """Add the parameter-gradient ``terms`` of :func:`input_gradients` that the modes use to
    the accumulators ``accs`` (the same six, any shape that broadcasts)."""
    acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip = accs
    t_decay, t_wa, t_wx, t_ba, t_bx, t_skip = terms
    if GATE_MODE != GATES_PRECOMPUTED:
        acc_decay += t_decay
    if GATE_MODE == GATES_SAMU:
        acc_wa += t_wa
        acc_wx += t_wx
        acc_ba += t_ba
        acc_bx += t_bx
    if OUT_MODE == OUT_Y_H_SKIP:
        acc_skip += t_skip
    return acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip


@triton.jit
def forward_chunk(
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
    GATE_MODE: tl.constexpr,
    OUT_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    WRITE_CHECKPOINT: tl.constexpr,
    SAVE_STATES: tl.constexpr,
):
    """Run one chunk row by row from its incoming state ``h`` [BLOCK_R], write its outputs
    (and the checkpoint ``h`` or the full states into ``SAVED``); return the outgoing state."""
    if WRITE_CHECKPOINT:
        tl.store(SAVED + state_offsets(b, chunk, offs_r, R, n_chunks), h, mask=col_mask)
    for block in range(T // UNROLL):
        t0 = chunk * T + block * UNROLL
        offs0 = row_offsets(b, t0, offs_r, L, R)
        rows = load_block(
            U, GATE_X, GATE_A, RESET, b, t0, offs0, offs_r, col_mask, L, R, UNROLL,
            GATE_MODE, HAS_RESETS, FULL_CHUNKS,
        )  # fmt: skip
        extras = ()
        for k in tl.static_range(UNROLL):
            extras = extras + (  # type: ignore[assignment]  # noqa: RUF005
                load_output_inputs(U, Y, offs0 + k * R, rows[k][4], rows[k][0], GATE_MODE,
                                   OUT_MODE),
            )  # fmt: skip
        for k in tl.static_range(UNROLL):
            first, second, third, start, mask = rows[k]
            y, skip_u = extras[k]  # type: ignore[var-annotated]
            a, x, _a2, _m, _gate_in, _gate_decay, u = gates_of_row(
                first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x,
                GATE_MODE, SHARED_SFU, HAS_RESETS,
            )  # fmt: skip
            h = a * h + x
            offs = offs0 + k * R
            if SAVE_STATES:
                tl.store(SAVED + offs, h, mask=mask)
            out = output_of(h, y, skip_u, u, skip, GATE_MODE, OUT_MODE)
            tl.store(OUT + offs, out.to(OUT.dtype.element_ty), mask=mask)
    return h


@triton.jit
def chunk_summary(
    U,
    GATE_X,
    GATE_A,
    RESET,
    b,
    chunk,
    run_decay,
    run_state,
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
):
    """Extend a run summary s -> run_decay s + run_state by one chunk (each [BLOCK_R]):
    returns the updated (run_decay, run_state)."""
    for block in range(T // UNROLL):
        t0 = chunk * T + block * UNROLL
        rows = load_block(
            U, GATE_X, GATE_A, RESET, b, t0, row_offsets(b, t0, offs_r, L, R), offs_r, col_mask,
            L, R, UNROLL, GATE_MODE, HAS_RESETS, FULL_CHUNKS,
        )  # fmt: skip
        for k in tl.static_range(UNROLL):
            first, second, third, start, mask = rows[k]
            a, x, _a2, _m, _gate_in, _gate_decay, _u = gates_of_row(
                first,
                second,
                third,
                start,
                mask,
                decay_scale,
                w_a,
                w_x,
                b_a,
                b_x,
                GATE_MODE,
                SHARED_SFU,
                HAS_RESETS,
            )
            run_decay = a * run_decay
            run_state = a * run_state + x
    return run_decay, run_state


@triton.jit
def reverse_chunk_summary(
    U,
    GATE_A,
    Y,
    GRAD_OUT,
    RESET,
    b,
    chunk,
    a_next,
    run_decay,
    run_grad,
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
):
    """Extend a reverse summary c -> run_decay c + run_grad (dL/dh at the first row after
    the chunk from the carry c) backwards over one chunk, last row first.

    ``a_next`` is the decay of the row after the chunk; returns (the decay of the chunk's
    first row, run_decay, run_grad).
    """
    for block in range(T // UNROLL):
        t_top = chunk * T + (T - 1 - block * UNROLL)
        offs_top = row_offsets(b, t_top, offs_r, L, R)
        for k in tl.static_range(UNROLL):
            t = t_top - k
            offs = offs_top - k * R
            mask = col_mask if FULL_CHUNKS else col_mask & row_valid(t, offs_r, L)
            _d_out, _y, g = output_grad(Y, GRAD_OUT, offs, mask, OUT_MODE)
            run_grad = g + a_next * run_grad
            run_decay = a_next * run_decay
            a_next = row_decay(
                U,
                GATE_A,
                RESET,
                b,
                t,
                offs,
                offs_r,
                col_mask,
                L,
                decay_scale,
                w_a,
                b_a,
                GATE_MODE,
                HAS_RESETS,
            )
    return a_next, run_decay, run_grad


@triton.jit
def recompute_chunk_states(
    U,
    GATE_X,
    GATE_A,
    RESET,
    SAVED,
    SCRATCH,
    b,
    chunk,
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
    GATE_MODE: tl.constexpr,
    T: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
):
    """Rerun a chunk from its checkpoint (SAVED [B, n_chunks, R]) and write its states h_t
    as rows 0..T-1 of this program's SCRATCH [T, BLOCK_R] (each thread rereads only what it
    wrote: no barrier)."""
    h = tl.load(SAVED + state_offsets(b, chunk, offs_r, R, n_chunks), mask=col_mask, other=0.0)
    lanes = tl.arange(0, BLOCK_R)
    for block in range(T // UNROLL):
        t0 = chunk * T + block * UNROLL
        rows = load_block(
            U, GATE_X, GATE_A, RESET, b, t0, row_offsets(b, t0, offs_r, L, R), offs_r, col_mask,
            L, R, UNROLL, GATE_MODE, HAS_RESETS, FULL_CHUNKS,
        )  # fmt: skip
        for k in tl.static_range(UNROLL):
            i = block * UNROLL + k
            first, second, third, start, mask = rows[k]
            a, x, _a2, _m, _gate_in, _gate_decay, _u = gates_of_row(
                first,
                second,
                third,
                start,
                mask,
                decay_scale,
                w_a,
                w_x,
                b_a,
                b_x,
                GATE_MODE,
                SHARED_SFU,
                HAS_RESETS,
            )
            h = a * h + x
            tl.store(SCRATCH + i * BLOCK_R + lanes, h)


@triton.jit
def backward_chunk(
    U,
    GATE_X,
    GATE_A,
    Y,
    RESET,
    GRAD_OUT,
    SAVED,
    SCRATCH,
    D_U,
    D_GATE_X,
    D_GATE_A,
    D_Y,
    b,
    chunk,
    dh,
    a_next,
    accs,
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
    BLOCK_R: tl.constexpr,
    SHARED_SFU: tl.constexpr,
    HAS_RESETS: tl.constexpr,
    FULL_CHUNKS: tl.constexpr,
    FUSED_WRITE: tl.constexpr,
):
    """Backward of one chunk, last row first, given ``dh`` = dL/dh at the next chunk's first
    row and ``a_next`` = that row's decay (dL/dh_t = g_t + a_{t+1} dL/dh_{t+1}).

    Writes the chunk's input gradients and adds its parameter-gradient terms to the six
    per-channel accumulators ``accs`` (:func:`accumulate_terms`). Returns (dL/dh at the
    chunk's first row, that row's decay a_0, the accumulators). The states h_t come from
    SAVED [B, L, R] or, with FUSED_WRITE, from this program's SCRATCH rows, recomputed from
    the checkpoint.
    """
    if FUSED_WRITE:
        recompute_chunk_states(
            U,
            GATE_X,
            GATE_A,
            RESET,
            SAVED,
            SCRATCH,
            b,
            chunk,
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
            GATE_MODE,
            T,
            UNROLL,
            BLOCK_R,
            SHARED_SFU,
            HAS_RESETS,
            FULL_CHUNKS,
        )
    lanes = tl.arange(0, BLOCK_R)
    for block in range(T // UNROLL):
        # Rows t0 .. t0 + UNROLL - 1, walked last first; all loads before the first store.
        i0 = T - (block + 1) * UNROLL
        t0 = chunk * T + i0
        offs0 = row_offsets(b, t0, offs_r, L, R)
        rows = load_block(
            U, GATE_X, GATE_A, RESET, b, t0, offs0, offs_r, col_mask, L, R, UNROLL,
            GATE_MODE, HAS_RESETS, FULL_CHUNKS,
        )  # fmt: skip
        extras = ()
        for k in tl.static_range(UNROLL):
            offs = offs0 + k * R
            mask = rows[k][4]
            if FUSED_WRITE:
                h = tl.load(SCRATCH + (i0 + k) * BLOCK_R + lanes)
            else:
                h = tl.load(SAVED + offs, mask=mask, other=0.0)
            d_out, _y, g = output_grad(Y, GRAD_OUT, offs, mask, OUT_MODE)
            skip_u = load_skip_input(U, offs, mask, h, GATE_MODE, OUT_MODE)
            extras = extras + ((h, d_out, g, skip_u),)  # type: ignore[assignment]  # noqa: RUF005
        for k in tl.static_range(UNROLL - 1, -1, -1):
            offs = offs0 + k * R
            first, second, third, start, mask = rows[k]
            h, d_out, g, skip_u = extras[k]
            a, x, a2, m, gate_in, gate_decay, u = gates_of_row(
                first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x,
                GATE_MODE, SHARED_SFU, HAS_RESETS,
            )  # fmt: skip
            if GATE_MODE == GATES_PRECOMPUTED and OUT_MODE == OUT_Y_H_SKIP:
                u = skip_u
            dh = g + a_next * dh
            a_next = a
            terms = input_gradients(
                D_U, D_GATE_X, D_GATE_A, D_Y, offs, mask, start, h, x, dh, d_out, g, a2, m,
                gate_in, gate_decay, u, decay_scale, w_a, w_x, skip, GATE_MODE, OUT_MODE,
                SHARED_SFU,
            )  # fmt: skip
            accs = accumulate_terms(accs, terms, GATE_MODE, OUT_MODE)
    return dh, a_next, accs


@triton.jit
def store_partials(
    PARTIAL,
    row,
    offs_r,
    col_mask,
    R,
    a_param_factor,
    decay_scale,
    s_decay,
    s_wa,
    s_wx,
    s_ba,
    s_bx,
    s_skip,
    GATE_MODE: tl.constexpr,
):
    """Write one program's parameter-gradient partial sums as row ``row`` of
    PARTIAL [P, NUM_PARTIALS, R]: RG-LRU [a_param]; SAMU [a_param, w_a, w_x, b_a, b_x,
    log_c, skip]; precomputed [skip].

    ``s_decay`` is the channels' sum of d log_a * gate_decay; both decay parameters' partials
    follow from it (:func:`channel_constants`): a_param's times ``a_param_factor``, and
    log_c's times ``decay_scale`` (d log_a / d log_c = log_a = decay_scale * gate_decay), so
    no per-element log_c term is accumulated. ``s_wa`` and ``s_ba`` are sums of the decay
    logit's gradient over decay_scale (a channel constant), multiplied here."""
    if GATE_MODE == GATES_SAMU:
        base = PARTIAL + row.to(tl.int64) * 7 * R + offs_r
        tl.store(base, s_decay * a_param_factor, mask=col_mask)
        tl.store(base + R, s_wa * decay_scale, mask=col_mask)
        tl.store(base + 2 * R, s_wx, mask=col_mask)
        tl.store(base + 3 * R, s_ba * decay_scale, mask=col_mask)
        tl.store(base + 4 * R, s_bx, mask=col_mask)
        tl.store(base + 5 * R, s_decay * decay_scale, mask=col_mask)
        tl.store(base + 6 * R, s_skip, mask=col_mask)
    elif GATE_MODE == GATES_RGLRU:
        tl.store(PARTIAL + row.to(tl.int64) * R + offs_r, s_decay * a_param_factor, mask=col_mask)
    else:
        tl.store(PARTIAL + row.to(tl.int64) * R + offs_r, s_skip, mask=col_mask)


SCALAR_GRADS: tl.constexpr = tl.constexpr(4)
"""Scalar parameter gradients of a backward: SAMU's (b_a, b_x, log_c, skip), or (0, 0, 0,
skip) for the precomputed gates' y*(h + skip*u) output."""
PARTIAL_LOAD: tl.constexpr = tl.constexpr(32)
"""Partial values per channel that :func:`finish_partials` loads at a time (rows x partials)."""
SUMMED_BLOCKS: tl.constexpr = tl.constexpr(128)
"""Channel blocks' scalar sums read at a time by :func:`finish_partials`' last program."""


@triton.jit
def finish_partials(PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, column, rows_written, n_rows,
                    offs_r, col_mask, R, CHANNELS: tl.constexpr,
                    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr):  # fmt: skip
    """Reduce the parameter-gradient partial sums inside the backward kernel, in a fixed
    order (bit-reproducible, no float atomics), so that no reduction kernel follows it.

    Call after this program's :func:`store_partials` of ``rows_written`` rows of PARTIAL
    [n_rows, P, R] for channel block ``column`` % cdiv(R, CHANNELS). COUNTERS (int32
    [cdiv(R, CHANNELS) + 1], zeroed) counts the rows written per block (unless one program
    writes them all); the program that completes a block's ``n_rows`` sums them in row
    order and writes the block's channels of D_CHANNEL [P_channel, R] (SAMU's a_param, w_a,
    w_x; RG-LRU's a_param). With scalar parameters (SAMU's b_a, b_x, log_c, skip; the
    precomputed gates' skip) it also writes the block's sums over its channels to the
    [cdiv(R, CHANNELS), 4] fp32 rows after PARTIAL's, and the program that completes the
    last block sums those in block order into D_SCALARS [4]. Releases and acquires as
    :func:`summaries.raise_flag` and :func:`summaries.wait_for_flag` do."""
    if GATE_MODE != GATES_PRECOMPUTED or OUT_MODE == OUT_Y_H_SKIP:
        n_blocks = tl.cdiv(R, CHANNELS)
        block = column % n_blocks
        tl.debug_barrier()
        if rows_written == n_rows:
            # The block's only writer (one batch row, no cut): nothing to count.
            arrived = n_rows
        else:
            arrived = tl.atomic_add(COUNTERS + block, rows_written, sem="acq_rel") + rows_written
        if arrived == n_rows:
            tl.debug_barrier()
            if GATE_MODE == GATES_SAMU:
                _finish_samu_block(PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, block, n_blocks,
                                   n_rows, offs_r, col_mask, R)  # fmt: skip
            else:
                # One partial per channel: RG-LRU's a_param, or the precomputed gates' skip.
                totals = _summed_rows(PARTIAL, n_rows, offs_r, col_mask, R, 1, 1)
                if GATE_MODE == GATES_RGLRU:
                    tl.store(D_CHANNEL + offs_r[None, :], totals, mask=col_mask[None, :])
                else:
                    over_channels = tl.where(col_mask[None, :], totals, 0.0)
                    skip = tl.sum(tl.sum(over_channels, axis=1), axis=0)
                    index = tl.arange(0, SCALAR_GRADS)
                    sums = PARTIAL + _as_int64(n_rows) * R
                    tl.store(sums + block * SCALAR_GRADS + index, tl.where(index == 3, skip, 0.0))
                    _finish_scalars(sums, COUNTERS, D_SCALARS, n_blocks)


@triton.jit
def _finish_samu_block(PARTIAL, COUNTERS, D_CHANNEL, D_SCALARS, block, n_blocks, n_rows, offs_r,
                       col_mask, R):  # fmt: skip
    """SAMU's block of :func:`finish_partials`: partials 0-2 to D_CHANNEL's rows, 3-6 (b_a,
    b_x, log_c, skip) summed over the block's channels into its scalar sums."""
    totals = _summed_rows(PARTIAL, n_rows, offs_r, col_mask, R, 7, 8)
    index = tl.arange(0, 8)
    channel_mask = col_mask[None, :] & (index[:, None] < 3)
    tl.store(D_CHANNEL + index[:, None] * R + offs_r[None, :], totals, mask=channel_mask)
    over_channels = tl.sum(tl.where(col_mask[None, :], totals, 0.0), axis=1)
    sums = PARTIAL + _as_int64(n_rows) * 7 * R
    is_scalar = (index >= 3) & (index < 7)
    tl.store(sums + block * SCALAR_GRADS + index - 3, over_channels, mask=is_scalar)
    _finish_scalars(sums, COUNTERS, D_SCALARS, n_blocks)


@triton.jit
def _as_int64(count):
    """``count`` (an int32 value, or an int argument Triton specialised to a constant) as an
    int64 scalar."""
    return tl.zeros([], dtype=tl.int64) + count


@triton.jit
def _finish_scalars(SUMS, COUNTERS, D_SCALARS, n_blocks):
    """Count one more channel block's scalar sums (SUMS [n_blocks, 4]) in COUNTERS[n_blocks];
    the block that completes them writes their sum, in block order, to D_SCALARS [4]."""
    tl.debug_barrier()
    done = tl.atomic_add(COUNTERS + n_blocks, 1, sem="acq_rel") + 1
    if done == n_blocks:
        tl.debug_barrier()
        index = tl.arange(0, SCALAR_GRADS)[None, :]
        total = tl.zeros([SCALAR_GRADS], dtype=tl.float32)
        for start in range(0, n_blocks, SUMMED_BLOCKS):
            rows = start + tl.arange(0, SUMMED_BLOCKS)[:, None]
            tile = tl.load(
                SUMS + rows * SCALAR_GRADS + index, mask=rows < n_blocks, other=0.0,
                cache_modifier=".cg",
            )  # fmt: skip
            total += tl.sum(tile, axis=0)
        tl.store(D_SCALARS + tl.arange(0, SCALAR_GRADS), total)


@triton.jit
def _summed_rows(PARTIAL, n_rows, offs_r, col_mask, R, P: tl.constexpr,
                 P_LANES: tl.constexpr):  # fmt: skip
    """[P_LANES, BLOCK_R] fp32: the rows of PARTIAL [n_rows, P, R] at channels ``offs_r``
    summed (lanes past P are 0), PARTIAL_LOAD // P_LANES rows loaded at a time and each such
    group's sum added in row order: the loads of a group are in flight together, and the
    order is fixed. Loads bypass L1 (``.cg``): other programs wrote these rows."""
    ROWS: tl.constexpr = PARTIAL_LOAD // P_LANES
    rows = tl.arange(0, ROWS)[:, None, None]
    k = tl.arange(0, P_LANES)[None, :, None]
    offsets = k * R + offs_r[None, None, :]
    mask = (k < P) & col_mask[None, None, :]
    totals = tl.zeros([P_LANES, offs_r.shape[0]], dtype=tl.float32)
    for first in range(0, n_rows, ROWS):
        row = first + rows
        group = tl.load(
            PARTIAL + (_as_int64(row) * P * R + offsets), mask=mask & (row < n_rows), other=0.0,
            cache_modifier=".cg",
        )  # fmt: skip
        totals += tl.sum(group, axis=0)
    return totals
