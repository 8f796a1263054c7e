"""Channels-first scans: the recurrence over [B, R, L] tensors, time contiguous in memory.

A program owns CB channels of one batch row and walks its sequence in tiles of TT time
steps. A tile [CB, TT] is loaded with the time axis across the threads, so that each
thread holds consecutive steps of one channel: its loads and stores are whole 16-byte
vectors, and the tile's steps are composed by ``tl.associative_scan`` along time (each
thread's steps in registers, then across lanes and warps), the state entering the tile
applied as one FMA per element. With one channel per program the grid has B * R programs,
so every SM holds several at once on any shape; [B, L, R] tensors instead cut R into
strips whose rows lie R apart, and a grid of B * R / 16 strips (``split.py``).

Forward, per tile: the gates of every element (:func:`chunk.gates_of_row`, elementwise),
the scan of (x, a) pairs along time, the output (:func:`chunk.output_of`), and the state
entering the tile written as its checkpoint SAVED [B, R, cdiv(L, TT)] fp32. The backward
walks the tiles last to first: it recomputes a tile's states from its checkpoint with the
forward's own code (bit for bit the forward's states), then composes the gradient
c_t = dL/dh_t = g_t + a_{t+1} c_{t+1} along time in reverse, with g_t dL/dh_t through the
output. The decay that carries c_{t+1} back is a_{t+1}, the next step's, so each element of
the reverse scan holds (C, Q, F): the gradient its segment gathers, the product of the
decays inside the segment after its first step, and that first step's decay
(:func:`_combine_reverse`); no shifted load is needed. What leaves a tile backward is
a_{t0} c_{t0}, the gradient of the state entering it; after the first tile it is dL/dh0.

Parameter-gradient terms are accumulated per element over the whole sequence in registers
and reduced once per program into a row of PARTIAL [B, P, R] (:func:`chunk.store_partials`),
which the launcher sums over B in a fixed order: bit-reproducible.
"""

import os
from dataclasses import dataclass

import triton
import triton.language as tl

from samu_kernels.common.chunk import (
    accumulate_terms,
    channel_constants,
    gates_of_row,
    input_gradients,
    load_gate_inputs,
    load_output_inputs,
    load_skip_input,
    output_grad,
    output_of,
    store_partials,
)

__all__ = [
    "TIME_TILE_ENV",
    "TimeTile",
    "backward_channels_first_kernel",
    "forward_channels_first_kernel",
    "time_tile",
]

TIME_TILE_ENV = "SAMU_KERNELS_TIME_TILE"
"""Environment variable overriding :func:`time_tile`: ``channels=CB,steps=TT,warps=W``
(any subset; powers of two)."""
STEPS = 256
"""Time steps of a tile: 8 per thread of a one-warp program (H100, 2026-12-07: 0.72-0.84x
the time of 1,024-step tiles on 4 warps; docs/performance.md, "Channels-first kernels,
timed")."""
WARPS = 1
MIN_STEPS = 16


@dataclass(frozen=True)
class TimeTile:
    """A channels-first program: ``channels`` channels (CB) by ``steps`` time steps (TT) a
    tile, on ``warps`` warps."""

    channels: int
    steps: int
    warps: int


def time_tile(length: int) -> TimeTile:
    """The tile for sequences of ``length`` steps, with the ``SAMU_KERNELS_TIME_TILE``
    override applied: one channel per program, one warp, 256-step tiles (a shorter sequence:
    one tile of the next power of two, at least 16)."""
    steps = min(STEPS, max(MIN_STEPS, triton.next_power_of_2(length)))
    values = {"channels": 1, "steps": steps, "warps": WARPS}
    for item in filter(None, os.environ.get(TIME_TILE_ENV, "").split(",")):
        key, _, text = item.partition("=")
        if key not in values or not text.isdigit() or int(text) & (int(text) - 1) or text == "0":
            raise ValueError(
                f"{TIME_TILE_ENV}: expected comma-separated channels=, steps=, warps= with "
                f"powers of two, got {item!r}"
            )
        values[key] = int(text)
    return TimeTile(**values)


@triton.jit
def _combine_forward(x_left, a_left, x_right, a_right):
    """(x, a) of two consecutive segments, the earlier on the left: h -> a h + x composed."""
    return x_left * a_right + x_right, a_left * a_right


@triton.jit
def _combine_reverse(c_later, q_later, f_later, c_earlier, q_earlier, f_earlier):
    """(C, Q, F) of two consecutive segments for the reverse scan (``reverse=True`` hands
    the later segment first). C: the gradient a segment gathers for its first step from its
    own steps, c_first = C + Q a_next c_next with a_next, c_next those of the step after the
    segment; Q: the product of the segment's decays after its first step; F: its first
    step's decay."""
    carried = q_earlier * f_later
    return c_earlier + carried * c_later, carried * q_later, f_earlier


@triton.jit
def _tile_offsets(b, k, offs_r, col_mask, L, R, TT: tl.constexpr, FULL_TILES: tl.constexpr):
    """(int64 element offsets [CB, TT], in-bounds mask [CB, TT], time steps [TT]) of tile
    ``k`` of batch row ``b``'s channels ``offs_r`` in a [B, R, L] tensor."""
    t = k * TT + tl.arange(0, TT)
    rows = (b.to(tl.int64) * R + offs_r) * L
    offs = rows[:, None] + t[None, :]
    if FULL_TILES:
        mask = col_mask[:, None] & (t[None, :] >= 0)
    else:
        mask = col_mask[:, None] & (t[None, :] < L)
    return offs, mask, t


@triton.jit
def _tile_gates(U, GATE_X, GATE_A, RESET, b, t, offs, mask, L, decay_scale, w_a, w_x, b_a, b_x,
                GATE_MODE: tl.constexpr, SHARED_SFU: tl.constexpr,
                HAS_RESETS: tl.constexpr):  # fmt: skip
    """:func:`chunk.gates_of_row` of a [CB, TT] tile: (a, x, a2, m, gate_in, gate_decay, u,
    start), the channel constants broadcast along time, ``start`` True where a document
    starts."""
    if HAS_RESETS:
        flags = tl.load(RESET + b.to(tl.int64) * L + t, mask=t < L, other=0)
        start = (flags != 0)[None, :] & mask
    else:
        start = mask & False
    first, second, third = load_gate_inputs(U, GATE_X, GATE_A, offs, mask, GATE_MODE)
    a, x, a2, m, gate_in, gate_decay, u = gates_of_row(
        first, second, third, start, mask, decay_scale[:, None], w_a[:, None], w_x[:, None],
        b_a, b_x, GATE_MODE, SHARED_SFU, HAS_RESETS,
    )  # fmt: skip
    return a, x, a2, m, gate_in, gate_decay, u, start


@triton.jit
def _tile_states(x, a, h_in):
    """States [CB, TT] of a tile of steps (x, a) entering with ``h_in`` [CB]."""
    h_local, a_product = tl.associative_scan((x, a), axis=1, combine_fn=_combine_forward)
    return h_local + a_product * h_in[:, None]


FOLD: tl.constexpr = tl.constexpr(8)


@triton.jit
def _fold(term, CB: tl.constexpr, TT: tl.constexpr):
    """A [CB, TT] tile's terms summed in groups of FOLD consecutive steps: [CB, TT / FOLD]."""
    return tl.sum(tl.reshape(term, [CB, TT // FOLD, FOLD]), axis=2)


@triton.jit
def forward_channels_first_kernel(U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, H0, OUT,
                                  FINAL, SAVED, L, R, n_tiles,
                                  GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr,
                                  SHARED_SFU: tl.constexpr, HAS_RESETS: tl.constexpr,
                                  HAS_H0: tl.constexpr, CB: tl.constexpr, TT: tl.constexpr,
                                  FULL_TILES: tl.constexpr):  # fmt: skip
    """Forward over [B, R, L] inputs: program (i, b) scans channels [i CB, (i + 1) CB) of
    batch row b in tiles of TT steps, writing OUT [B, R, L], the final state FINAL [B, R]
    and every tile's entering state SAVED [B, R, n_tiles] (fp32)."""
    b = tl.program_id(1)
    offs_r = tl.program_id(0) * CB + tl.arange(0, CB)
    col_mask = offs_r < R
    decay_scale, _a_param_factor, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    states = b.to(tl.int64) * R + offs_r
    if HAS_H0:
        h = tl.load(H0 + states, mask=col_mask, other=0.0)
    else:
        h = tl.zeros([CB], dtype=tl.float32)
    last = tl.arange(0, TT)[None, :] == TT - 1
    for k in tl.range(0, n_tiles):
        offs, mask, t = _tile_offsets(b, k, offs_r, col_mask, L, R, TT, FULL_TILES)
        a, x, _a2, _m, _gate_in, _gate_decay, u, _start = _tile_gates(
            U, GATE_X, GATE_A, RESET, b, t, offs, mask, L, decay_scale, w_a, w_x, b_a, b_x,
            GATE_MODE, SHARED_SFU, HAS_RESETS,
        )  # fmt: skip
        y, skip_u = load_output_inputs(U, Y, offs, mask, u, GATE_MODE, OUT_MODE)
        tl.store(SAVED + states * n_tiles + k, h, mask=col_mask)
        hs = _tile_states(x, a, h)
        out = output_of(hs, y, skip_u, skip_u, skip, GATE_MODE, OUT_MODE)
        tl.store(OUT + offs, out.to(OUT.dtype.element_ty), mask=mask)
        h = tl.sum(tl.where(last, hs, 0.0), axis=1)
    tl.store(FINAL + states, h, mask=col_mask)


@triton.jit
def backward_channels_first_kernel(U, GATE_X, GATE_A, Y, CHANNEL, SCALARS, RESET, GRAD_OUT,
                                   GRAD_FINAL, SAVED, D_U, D_GATE_X, D_GATE_A, D_Y, D_H0,
                                   PARTIAL, L, R, n_tiles,
                                   GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr,
                                   SHARED_SFU: tl.constexpr, HAS_RESETS: tl.constexpr,
                                   CB: tl.constexpr, TT: tl.constexpr,
                                   FULL_TILES: tl.constexpr):  # fmt: skip
    """Backward of :func:`forward_channels_first_kernel`: the input gradients [B, R, L] (those
    the modes have), dL/dh0 D_H0 [B, R] and this program's parameter-gradient sums as row b
    of PARTIAL [B, P, R]. GRAD_FINAL [B, R] is dL/d(final state) (zeros where none)."""
    b = tl.program_id(1)
    offs_r = tl.program_id(0) * CB + tl.arange(0, CB)
    col_mask = offs_r < R
    decay_scale, a_param_factor, w_a, w_x, b_a, b_x, skip = channel_constants(
        CHANNEL, SCALARS, offs_r, col_mask, R, GATE_MODE, OUT_MODE
    )
    states = b.to(tl.int64) * R + offs_r
    # a_{t1} c_{t1} of the step after the tile: dL/d(final state) before the last tile.
    carried = tl.load(GRAD_FINAL + states, mask=col_mask, other=0.0)
    first = tl.arange(0, TT)[None, :] == 0
    zero = tl.zeros([CB, TT // FOLD], dtype=tl.float32)
    accs = (zero, zero, zero, zero, zero, zero)
    for j in tl.range(0, n_tiles):
        k = n_tiles - 1 - j
        offs, mask, t = _tile_offsets(b, k, offs_r, col_mask, L, R, TT, FULL_TILES)
        a, x, a2, m, gate_in, gate_decay, u, start = _tile_gates(
            U, GATE_X, GATE_A, RESET, b, t, offs, mask, L, decay_scale, w_a, w_x, b_a, b_x,
            GATE_MODE, SHARED_SFU, HAS_RESETS,
        )  # fmt: skip
        d_out, _y, g = output_grad(Y, GRAD_OUT, offs, mask, OUT_MODE)
        g = tl.where(mask, g, 0.0)
        skip_u = load_skip_input(U, offs, mask, u, GATE_MODE, OUT_MODE)
        hs = _tile_states(x, a, tl.load(SAVED + states * n_tiles + k, mask=col_mask, other=0.0))
        gathered, decays, _first_decay = tl.associative_scan(
            (g, tl.full([CB, TT], 1.0, tl.float32), a),
            axis=1,
            combine_fn=_combine_reverse,
            reverse=True,
        )
        dh = gathered + decays * carried[:, None]
        terms = input_gradients(
            D_U, D_GATE_X, D_GATE_A, D_Y, offs, mask, start, hs, x, dh, d_out, g, a2, m,
            gate_in, gate_decay, skip_u, decay_scale[:, None], w_a[:, None], w_x[:, None],
            skip, GATE_MODE, OUT_MODE, SHARED_SFU,
        )  # fmt: skip
        t_decay, t_wa, t_wx, t_ba, t_bx, t_skip = terms
        folded = (
            _fold(t_decay, CB, TT),
            _fold(t_wa, CB, TT),
            _fold(t_wx, CB, TT),
            _fold(t_ba, CB, TT),
            _fold(t_bx, CB, TT),
            _fold(t_skip, CB, TT),
        )
        accs = accumulate_terms(accs, folded, GATE_MODE, OUT_MODE)
        carried = tl.sum(tl.where(first, a * dh, 0.0), axis=1)
    tl.store(D_H0 + states, carried, mask=col_mask)
    acc_decay, acc_wa, acc_wx, acc_ba, acc_bx, acc_skip = accs
    store_partials(
        PARTIAL, b, offs_r, col_mask, R, a_param_factor, decay_scale,
        tl.sum(acc_decay, axis=1), tl.sum(acc_wa, axis=1), tl.sum(acc_wx, axis=1),
        tl.sum(acc_ba, axis=1), tl.sum(acc_bx, axis=1), tl.sum(acc_skip, axis=1), GATE_MODE,
    )  # fmt: skip
