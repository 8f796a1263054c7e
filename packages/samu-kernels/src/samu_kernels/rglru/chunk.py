"""RG-LRU on the Triton chunked scan: the inputs of each backend mode."""

from __future__ import annotations

import torch

from samu_kernels.backends import BackendSpec
from samu_kernels.common.custom_ops import scan
from samu_kernels.common.launch import GateMode, OutMode, scan_config
from samu_kernels.common.reference import reset_mask, swap_layout
from samu_kernels.common.resets import kernel_resets
from samu_kernels.rglru.naive import rglru_gates

__all__ = ["rglru_chunk"]


def rglru_chunk(
    u: torch.Tensor,
    gate_x_logits: torch.Tensor,
    gate_a_logits: torch.Tensor,
    a_param: torch.Tensor,
    *,
    y: torch.Tensor | None,
    segment_pos: torch.Tensor | None,
    h0: torch.Tensor | None,
    spec: BackendSpec,
    channels_first: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RG-LRU by a Triton backend (arguments as :func:`samu_kernels.rglru_scan`, checked).

    ``fused``: the gates are computed in the kernel from the logits; otherwise PyTorch
    computes log_a and x (fp32) and the kernel runs the plain scan. ``fused_output``: the
    kernel writes y*h; otherwise it writes h and PyTorch multiplies by y.
    ``channels_first``: u, the logits, y and the output are [B, R, L].

    Returns:
        (output [B, L, R] in u's dtype ([B, R, L] if channels first), final state [B, R]
        fp32).
    """
    fuse_output = y is not None and spec.fused_output
    out_mode = OutMode.Y_H if fuse_output else OutMode.H
    kernel_y = y if fuse_output else None
    if spec.fused:
        config = scan_config(spec, GateMode.RGLRU, out_mode, channels_first=channels_first)
        output, final_state = scan(
            u,
            gate_x=gate_x_logits,
            gate_a=gate_a_logits,
            y=kernel_y,
            parameters=a_param,
            reset=kernel_resets(segment_pos),
            h0=h0,
            config=config,
        )
    else:
        log_a, x = (
            swap_layout(gate, channels_first)
            for gate in rglru_gates(
                swap_layout(u, channels_first),
                swap_layout(gate_x_logits, channels_first),
                swap_layout(gate_a_logits, channels_first),
                a_param,
                reset_mask(segment_pos),
            )
        )
        config = scan_config(spec, GateMode.PRECOMPUTED, out_mode, channels_first=channels_first)
        output, final_state = scan(
            u,
            gate_x=x,
            gate_a=log_a,
            y=kernel_y,
            parameters=None,
            reset=None,
            h0=h0,
            config=config,
        )
    if y is not None and not fuse_output:
        output = y * output
    return output, final_state
