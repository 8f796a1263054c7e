"""PyTorch reference math shared by both recurrences (the oracle and the peer path).

Everything here runs in the accumulation dtype: float32 for bfloat16/float32 inputs,
float64 for float64 inputs.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "MAX_SQRT_GRADIENT",
    "accumulation_dtype",
    "gated_input",
    "linear_scan_reference",
    "reset_mask",
    "sqrt_bound_derivative",
]

MAX_SQRT_GRADIENT = 1000.0
"""d/dz sqrt(z) is clipped to 1 / sqrt(max(4 z, 1 / MAX_SQRT_GRADIENT**2)) (recurrentgemma)."""


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 inputs, float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def swap_layout(sequence: torch.Tensor, channels_first: bool) -> torch.Tensor:
    """A [B, R, L] sequence as a [B, L, R] view, or back (the transpose of the last two
    dimensions), where ``channels_first``; the sequence itself otherwise."""
    return sequence.transpose(1, 2) if channels_first else sequence


def reset_mask(segment_pos: torch.Tensor | None) -> torch.Tensor | None:
    """[B, L] bool, True where a document starts (segment_pos == 0); None without resets."""
    return None if segment_pos is None else segment_pos == 0


class _SqrtBoundDerivative(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, z: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(z)
        return torch.sqrt(z)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (z,) = ctx.saved_tensors
        return grad / torch.sqrt(torch.clamp(4.0 * z, min=1.0 / MAX_SQRT_GRADIENT**2))


def sqrt_bound_derivative(z: torch.Tensor) -> torch.Tensor:
    """sqrt(z) whose derivative is clipped at MAX_SQRT_GRADIENT (any shape and float dtype)."""
    result: torch.Tensor = _SqrtBoundDerivative.apply(z)
    return result


def gated_input(
    u: torch.Tensor,
    input_gate: torch.Tensor,
    log_a: torch.Tensor,
    reset: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The scan's input and log-decay from the gates, with document resets applied.

    Args:
        u: [B, L, R] input, accumulation dtype.
        input_gate: [B, L, R] sigmoid input gate, accumulation dtype.
        log_a: [B, L, R] log of the decay (<= 0), accumulation dtype.
        reset: [B, L] bool or None.

    Returns:
        (log_a, x): log_a is -inf where a document starts (decay 0) and
        x = sqrt(1 - a^2) * input_gate * u, with the multiplier 1 at a document start.
    """
    multiplier = sqrt_bound_derivative(-torch.expm1(2.0 * log_a))
    if reset is not None:
        starts = reset[..., None]
        multiplier = torch.where(starts, torch.ones_like(multiplier), multiplier)
        log_a = torch.where(starts, torch.full_like(log_a, float("-inf")), log_a)
    return log_a, multiplier * input_gate * u


class _LinearScan(torch.autograd.Function):
    """h_t = exp(log_a_t) h_{t-1} + x_t by a loop over time, with a loop-over-time backward."""

    @staticmethod
    def forward(
        ctx: Any, log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        decay = torch.exp(log_a)
        states = torch.empty_like(x)
        state = h0
        for step in range(x.shape[1]):
            state = decay[:, step] * state + x[:, step]
            states[:, step] = state
        ctx.save_for_backward(decay, states, h0)
        return states, state

    @staticmethod
    def backward(
        ctx: Any, grad_states: torch.Tensor, grad_last: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        decay, states, h0 = ctx.saved_tensors
        grad_log_a = torch.empty_like(states)
        grad_x = torch.empty_like(states)
        carry = grad_last
        for step in range(states.shape[1] - 1, -1, -1):
            grad_h = grad_states[:, step] + carry
            previous = states[:, step - 1] if step > 0 else h0
            grad_x[:, step] = grad_h
            grad_log_a[:, step] = grad_h * decay[:, step] * previous
            carry = decay[:, step] * grad_h
        return grad_log_a, grad_x, carry


def linear_scan_reference(
    log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequential linear recurrence h_t = exp(log_a_t) * h_{t-1} + x_t, differentiable.

    Args:
        log_a: [B, L, R] log-decay (-inf allowed: decay 0), float32 or float64.
        x: [B, L, R] input, same dtype as ``log_a``.
        h0: [B, R] initial state or None (zeros), same dtype.

    Returns:
        (h [B, L, R], h_last [B, R]) in the dtype of ``x``.
    """
    start = torch.zeros_like(x[:, 0]) if h0 is None else h0.to(x.dtype)
    states, last = _LinearScan.apply(log_a, x, start)
    return states, last
