"""SAMU on the Triton chunked scan: the inputs of each controller and backend mode."""

from __future__ import annotations

import torch

from samu_kernels.backends import BackendSpec
from samu_kernels.common.custom_ops import scan
from samu_kernels.common.launch import GateMode, OutMode, scan_config
from samu_kernels.common.reference import reset_mask, swap_layout
from samu_kernels.common.resets import kernel_resets
from samu_kernels.controllers import FUSED_COORDS_CONTROLLER
from samu_kernels.samu.naive import SamuParams, samu_gates, samu_output

__all__ = ["samu_chunk"]


def samu_chunk(
    u: torch.Tensor,
    y: torch.Tensor,
    params: SamuParams,
    skip: torch.Tensor,
    *,
    segment_pos: torch.Tensor | None,
    h0: torch.Tensor | None,
    spec: BackendSpec,
    controller: str,
    channels_first: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SAMU by a Triton backend (arguments as :func:`samu_kernels.samu_scan`, checked).

    Controller ``fp32_fused_coords``: the kernel computes the coordinates and gates from u;
    ``reference``: PyTorch computes log_a and x (fp32) and the kernel runs the plain scan.
    ``fused_output``: the kernel writes y*(h + skip*u); otherwise it writes h and PyTorch
    applies the output gate. ``channels_first``: u, y and the output are [B, R, L].

    Returns:
        (output [B, L, R] in u's dtype ([B, R, L] if channels first), final state [B, R]
        fp32).
    """
    out_mode = OutMode.Y_H_SKIP if spec.fused_output else OutMode.H
    kernel_y = y if spec.fused_output else None
    if controller == FUSED_COORDS_CONTROLLER:
        a_param, w_a, b_a, w_x, b_x, log_c = params
        config = scan_config(spec, GateMode.SAMU, out_mode, channels_first=channels_first)
        output, final_state = scan(
            u,
            gate_x=None,
            gate_a=None,
            y=kernel_y,
            # One copy kernel packs all seven (their gradient comes back as one buffer).
            parameters=torch.cat(
                [a_param, w_a, w_x, *(p.reshape(1) for p in (b_a, b_x, log_c, skip))]
            ),
            reset=kernel_resets(segment_pos),
            h0=h0,
            config=config,
        )
    else:
        log_a, x = (
            swap_layout(gate, channels_first)
            for gate in samu_gates(swap_layout(u, channels_first), params, reset_mask(segment_pos))
        )
        config = scan_config(spec, GateMode.PRECOMPUTED, out_mode, channels_first=channels_first)
        # The output y*(h + skip*u) reads skip, the last of the four scalars.
        scalars = torch.cat([skip.new_zeros(3), skip.reshape(1)]) if spec.fused_output else None
        output, final_state = scan(
            u,
            gate_x=x,
            gate_a=log_a,
            y=kernel_y,
            parameters=scalars,
            reset=None,
            h0=h0,
            config=config,
        )
    if not spec.fused_output:
        output = samu_output(output.float(), u, y, skip)
    return output, final_state
