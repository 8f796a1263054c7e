"""The public SAMU scan: argument checks and dispatch to the named backend and controller."""

from __future__ import annotations

import torch

from samu_kernels.backends import DEFAULT_BACKENDS, check_backend
from samu_kernels.common.reference import reset_mask, swap_layout
from samu_kernels.controllers import DEFAULT_CONTROLLER
from samu_kernels.peers import linear_scan_of
from samu_kernels.samu.naive import samu_naive
from samu_kernels.scan_output import ScanOutput
from samu_kernels.validation import (
    check_channel_param,
    check_initial_state,
    check_scalar_param,
    check_segment_pos,
    check_sequence,
    check_sequence_like,
)

__all__ = ["samu_scan"]


def samu_scan(
    u: torch.Tensor,
    y: torch.Tensor,
    a_param: torch.Tensor,
    gate_a_weight: torch.Tensor,
    gate_a_bias: torch.Tensor,
    gate_x_weight: torch.Tensor,
    gate_x_bias: torch.Tensor,
    log_c: torch.Tensor,
    skip: torch.Tensor,
    *,
    segment_pos: torch.Tensor | None = None,
    h0: torch.Tensor | None = None,
    backend: str = DEFAULT_BACKENDS["samu"],
    controller: str = DEFAULT_CONTROLLER,
    channels_first: bool = False,
) -> ScanOutput:
    """The SAMU recurrence with its coordinate-wise controller, forward and backward.

    z_a = w_a u + b_a, z_x = w_x u + b_x, log_a = -exp(log_c) softplus(a_param) sigmoid(z_a),
    h_t = a_t h_{t-1} + sqrt(1 - a_t^2) sigmoid(z_x) u_t (decay 0 and multiplier 1 where
    ``segment_pos == 0``), o_t = y_t (h_t + skip u_t). All math in float32.

    Args:
        u, y: [B, L, R], one dtype: bfloat16 or float32 (also float64 on the reference
            backend).
        a_param, gate_a_weight, gate_x_weight: [R] float32 (float64 with float64 inputs).
        gate_a_bias, gate_x_bias, log_c, skip: 0-d float32 (float64 with float64 inputs).
        segment_pos: optional [B, L] integer positions; 0 starts a document.
        h0: optional [B, R] float32 initial state (float64 with float64 inputs).
        backend: a backend name (see :func:`samu_kernels.parse_backend`).
        controller: "fp32_fused_coords" (gates inside the Triton kernel) or "reference"
            (gates in PyTorch, the kernel runs the plain gated scan).
        channels_first: u, y and the output are [B, R, L] (time contiguous, as
            ``nn.Conv1d``'s [N, C, L]) instead of [B, L, R]; segment_pos, h0 and the final
            state keep their shapes. Triton backends then run the channels-first kernels
            (docs/kernels.md, "Channels-first kernels": the name's chunk, hierarchical,
            grouped_prefix and fused_write tokens choose between the [B, L, R] kernels and
            do not apply); the reference and peer backends run on transposed views.

    Returns:
        ScanOutput(output [B, L, R] in u's dtype ([B, R, L] if ``channels_first``),
        final_state [B, R] float32).
    """
    spec = check_backend("samu", backend, controller)
    check_sequence("u", u, allow_float64=spec.is_reference, channels_first=channels_first)
    check_sequence_like("y", y, u)
    # [B, L, R] views of channels-first sequences, for the checks and the PyTorch paths.
    u_rows, y_rows = (swap_layout(t, channels_first) for t in (u, y))
    for name, channel in (
        ("a_param", a_param),
        ("gate_a_weight", gate_a_weight),
        ("gate_x_weight", gate_x_weight),
    ):
        check_channel_param(name, channel, u_rows)
    for name, scalar in (
        ("gate_a_bias", gate_a_bias),
        ("gate_x_bias", gate_x_bias),
        ("log_c", log_c),
        ("skip", skip),
    ):
        check_scalar_param(name, scalar, u)
    if segment_pos is not None:
        check_segment_pos(segment_pos, u_rows)
    if h0 is not None:
        check_initial_state(h0, u_rows)

    params = (a_param, gate_a_weight, gate_a_bias, gate_x_weight, gate_x_bias, log_c)
    if spec.is_triton:
        # Imported here: triton is optional (Linux only) and the reference needs none.
        from samu_kernels.samu.chunk import samu_chunk  # noqa: PLC0415

        return ScanOutput(
            *samu_chunk(
                u,
                y,
                params,
                skip,
                segment_pos=segment_pos,
                h0=h0,
                spec=spec,
                controller=controller,
                channels_first=channels_first,
            )
        )
    reset = reset_mask(segment_pos)
    linear_scan, scan_dtype = linear_scan_of(spec, u.dtype)
    output, final_state = samu_naive(
        u_rows,
        y_rows,
        params,
        skip,
        reset=reset,
        h0=h0,
        linear_scan=linear_scan,
        scan_input_dtype=scan_dtype,
    )
    return ScanOutput(swap_layout(output, channels_first), final_state)
