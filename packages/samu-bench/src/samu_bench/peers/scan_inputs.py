"""Argument checks and the initial-state fold shared by the peer linear-scan adapters.

Every adapter computes h_t = exp(log_a_t) * h_{t-1} + x_t for log_a fp32 [B, L, R],
x [B, L, R] (compute dtype) and an optional fp32 initial state h0 [B, R], and returns
(h [B, L, R], h_last fp32 [B, R]) — the contract of `samu_kernels.register_linear_scan`.
"""

from __future__ import annotations

import torch

__all__ = ["check_linear_scan_inputs", "fold_initial_state", "last_state"]


def check_linear_scan_inputs(log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None) -> None:
    """Check the arguments of a peer linear scan.

    Args:
        log_a: [B, L, R] float32 log-decay (-inf where a document starts).
        x: [B, L, R] floating input, on log_a's device.
        h0: None or [B, R] float32 initial state on log_a's device.

    Raises:
        TypeError: a wrong dtype.
        ValueError: a wrong rank, shape or device.
    """
    if log_a.dtype != torch.float32:
        raise TypeError(f"log_a must be float32, got {log_a.dtype}")
    if log_a.dim() != 3:
        raise ValueError(f"log_a must be [B, L, R], got shape {tuple(log_a.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating tensor, got {x.dtype}")
    if x.shape != log_a.shape:
        raise ValueError(f"x must have log_a's shape {tuple(log_a.shape)}, got {tuple(x.shape)}")
    if x.device != log_a.device:
        raise ValueError(f"x must be on log_a's device {log_a.device}, got {x.device}")
    if h0 is None:
        return
    if h0.dtype != torch.float32:
        raise TypeError(f"h0 must be float32, got {h0.dtype}")
    expected = (log_a.shape[0], log_a.shape[2])
    if tuple(h0.shape) != expected:
        raise ValueError(f"h0 must be [B, R] = {expected}, got {tuple(h0.shape)}")
    if h0.device != log_a.device:
        raise ValueError(f"h0 must be on log_a's device {log_a.device}, got {h0.device}")


def fold_initial_state(
    log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None
) -> torch.Tensor:
    """The input of a zero-start scan that computes the same states as a start from h0.

    h_0 = a_0 h0 + x_0, so replacing x_0 by x_0 + exp(log_a_0) * h0 and starting from zero
    gives the same h; gradients reach h0 and log_a_0 through autograd. With an h0 the
    result is float32 (the state must not be rounded to a 16-bit compute dtype).

    Args:
        log_a: [B, L, R] float32.
        x: [B, L, R] floating.
        h0: None (x is returned unchanged) or [B, R] float32.

    Returns:
        [B, L, R]: x, or the folded input in float32.
    """
    if h0 is None:
        return x
    x = x.float()
    first = x[:, :1] + torch.exp(log_a[:, :1]) * h0[:, None]
    return torch.cat([first, x[:, 1:]], dim=1)


def last_state(h: torch.Tensor) -> torch.Tensor:
    """h_last = h[:, -1] as float32 [B, R] (differentiable; the precision of h's dtype)."""
    return h[:, -1].float()
