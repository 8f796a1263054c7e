"""SAMU in PyTorch: the reference controller/backend and the gates for peer backends."""

from __future__ import annotations

import torch
from torch.nn.functional import softplus

from samu_kernels.common.reference import accumulation_dtype, gated_input
from samu_kernels.peers import LinearScanFn

__all__ = ["SamuParams", "samu_gates", "samu_naive", "samu_output"]

SamuParams = tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor
]
"""(a_param [R], gate_a_weight [R], gate_a_bias [], gate_x_weight [R], gate_x_bias [], log_c [])."""


def samu_gates(
    u: torch.Tensor, params: SamuParams, reset: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """SAMU's reference controller: log-decay and normalised input in the accumulation dtype.

    z_a = w_a u + b_a, z_x = w_x u + b_x, log_a = -exp(log_c) softplus(a_param) sigmoid(z_a),
    x = sqrt(1 - a^2) sigmoid(z_x) u (multiplier 1 and decay 0 where a document starts).

    Args:
        u: [B, L, R] bfloat16/float32/float64.
        params: see :data:`SamuParams`.
        reset: [B, L] bool or None.

    Returns:
        (log_a, x), each [B, L, R] float32 (float64 for float64 inputs).
    """
    acc = accumulation_dtype(u.dtype)
    a_param, w_a, b_a, w_x, b_x, log_c = (p.to(acc) for p in params)
    u_acc = u.to(acc)
    retain = torch.sigmoid(w_a * u_acc + b_a)
    input_gate = torch.sigmoid(w_x * u_acc + b_x)
    log_a = -torch.exp(log_c) * softplus(a_param) * retain
    return gated_input(u_acc, input_gate, log_a, reset)


def samu_output(
    states: torch.Tensor, u: torch.Tensor, y: torch.Tensor, skip: torch.Tensor
) -> torch.Tensor:
    """o = y * (h + skip * u) computed in the dtype of ``states``, returned in u's dtype."""
    acc = states.dtype
    return (y.to(acc) * (states + skip.to(acc) * u.to(acc))).to(u.dtype)


def samu_naive(
    u: torch.Tensor,
    y: torch.Tensor,
    params: SamuParams,
    skip: torch.Tensor,
    *,
    reset: torch.Tensor | None,
    h0: torch.Tensor | None,
    linear_scan: LinearScanFn,
    scan_input_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SAMU with PyTorch gates and the recurrence by ``linear_scan``.

    Shapes and dtypes as :func:`samu_kernels.samu_scan`; ``linear_scan`` receives x in
    ``scan_input_dtype``. Returns (output [B, L, R] in u's dtype, final state [B, R] in the
    accumulation dtype).
    """
    log_a, x = samu_gates(u, params, reset)
    states, final_state = linear_scan(log_a, x.to(scan_input_dtype), h0)
    return samu_output(states.to(log_a.dtype), u, y, skip), final_state.to(log_a.dtype)
