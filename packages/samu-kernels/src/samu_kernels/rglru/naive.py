"""RG-LRU in PyTorch: the reference backend and the gate computation for peer backends."""

from __future__ import annotations

import torch
from torch.nn.functional import softplus

from samu_kernels.common.reference import accumulation_dtype, gated_input
from samu_kernels.peers import LinearScanFn

__all__ = ["RGLRU_LOG_DECAY_SCALE", "rglru_gates", "rglru_naive"]

RGLRU_LOG_DECAY_SCALE = 8.0
"""RG-LRU's constant c in log_a = -c * sigmoid(gate_a_logits) * softplus(a_param)."""


def rglru_gates(
    u: torch.Tensor,
    gate_x_logits: torch.Tensor,
    gate_a_logits: torch.Tensor,
    a_param: torch.Tensor,
    reset: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RG-LRU log-decay and normalised input, in the accumulation dtype.

    Args:
        u, gate_x_logits, gate_a_logits: [B, L, R], one dtype.
        a_param: [R].
        reset: [B, L] bool (True where a document starts) or None.

    Returns:
        (log_a, x), each [B, L, R] float32 (float64 for float64 inputs); log_a is -inf at
        document starts.
    """
    acc = accumulation_dtype(u.dtype)
    gate_x = torch.sigmoid(gate_x_logits.to(acc))
    gate_a = torch.sigmoid(gate_a_logits.to(acc))
    log_a = -RGLRU_LOG_DECAY_SCALE * gate_a * softplus(a_param.to(acc))
    return gated_input(u.to(acc), gate_x, log_a, reset)


def rglru_naive(
    u: torch.Tensor,
    gate_x_logits: torch.Tensor,
    gate_a_logits: torch.Tensor,
    a_param: torch.Tensor,
    *,
    y: torch.Tensor | None,
    reset: torch.Tensor | None,
    h0: torch.Tensor | None,
    linear_scan: LinearScanFn,
    scan_input_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RG-LRU with PyTorch gates and the recurrence by ``linear_scan``.

    Shapes and dtypes as :func:`samu_kernels.rglru_scan`; ``linear_scan`` receives x in
    ``scan_input_dtype``. Returns (output [B, L, R] in u's dtype, final state [B, R] in the
    accumulation dtype).
    """
    log_a, x = rglru_gates(u, gate_x_logits, gate_a_logits, a_param, reset)
    states, final_state = linear_scan(log_a, x.to(scan_input_dtype), h0)
    states = states.to(log_a.dtype)
    output = states if y is None else y.to(log_a.dtype) * states
    return output.to(u.dtype), final_state.to(log_a.dtype)
