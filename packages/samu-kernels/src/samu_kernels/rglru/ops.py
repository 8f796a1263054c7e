"""The public RG-LRU scan: argument checks and dispatch to the named backend."""

from __future__ import annotations

import torch

from samu_kernels.backends import DEFAULT_BACKENDS, check_backend
from samu_kernels.common.reference import reset_mask, swap_layout
from samu_kernels.peers import linear_scan_of
from samu_kernels.rglru.naive import rglru_naive
from samu_kernels.scan_output import ScanOutput
from samu_kernels.validation import (
    check_channel_param,
    check_initial_state,
    check_segment_pos,
    check_sequence,
    check_sequence_like,
)

__all__ = ["rglru_scan"]


def rglru_scan(
    u: torch.Tensor,
    gate_x_logits: torch.Tensor,
    gate_a_logits: torch.Tensor,
    a_param: torch.Tensor,
    y: torch.Tensor | None = None,
    *,
    segment_pos: torch.Tensor | None = None,
    h0: torch.Tensor | None = None,
    backend: str = DEFAULT_BACKENDS["rglru"],
    channels_first: bool = False,
) -> ScanOutput:
    """The RG-LRU recurrence (recurrentgemma's), forward and backward.

    gate_x = sigmoid(gate_x_logits), gate_a = sigmoid(gate_a_logits),
    log_a = -8 gate_a softplus(a_param), h_t = a_t h_{t-1} + sqrt(1 - a_t^2) gate_x_t u_t,
    with decay 0 and multiplier 1 where ``segment_pos == 0``. All math in float32.

    Args:
        u, gate_x_logits, gate_a_logits: [B, L, R], one dtype: bfloat16 or float32 (also
            float64 on the reference backend).
        a_param: [R] float32 (float64 with float64 inputs).
        y: optional [B, L, R] output gate, u's dtype; the output is then y * h.
        segment_pos: optional [B, L] integer positions; 0 starts a document.
        h0: optional [B, R] float32 initial state (float64 with float64 inputs).
        backend: a backend name (see :func:`samu_kernels.parse_backend`).
        channels_first: u, the logits, y and the output are [B, R, L] (time contiguous, as
            ``nn.Conv1d``'s [N, C, L]) instead of [B, L, R]; segment_pos, h0 and the final
            state keep their shapes. Triton backends then run the channels-first kernels
            (docs/kernels.md, "Channels-first kernels": the name's chunk, hierarchical,
            grouped_prefix and fused_write tokens choose between the [B, L, R] kernels and
            do not apply); the reference and peer backends run on transposed views.

    Returns:
        ScanOutput(output [B, L, R] in u's dtype ([B, R, L] if ``channels_first``),
        final_state [B, R] float32).
    """
    spec = check_backend("rglru", backend, None)
    check_sequence("u", u, allow_float64=spec.is_reference, channels_first=channels_first)
    check_sequence_like("gate_x_logits", gate_x_logits, u)
    check_sequence_like("gate_a_logits", gate_a_logits, u)
    if y is not None:
        check_sequence_like("y", y, u)
    # [B, L, R] views of channels-first sequences, for the checks and the PyTorch paths.
    u_rows, gate_x_rows, gate_a_rows = (
        swap_layout(t, channels_first) for t in (u, gate_x_logits, gate_a_logits)
    )
    check_channel_param("a_param", a_param, u_rows)
    if segment_pos is not None:
        check_segment_pos(segment_pos, u_rows)
    if h0 is not None:
        check_initial_state(h0, u_rows)

    if spec.is_triton:
        # Imported here: triton is optional (Linux only) and the reference needs none.
        from samu_kernels.rglru.chunk import rglru_chunk  # noqa: PLC0415

        return ScanOutput(
            *rglru_chunk(
                u,
                gate_x_logits,
                gate_a_logits,
                a_param,
                y=y,
                segment_pos=segment_pos,
                h0=h0,
                spec=spec,
                channels_first=channels_first,
            )
        )
    reset = reset_mask(segment_pos)
    linear_scan, scan_dtype = linear_scan_of(spec, u.dtype)
    output, final_state = rglru_naive(
        u_rows,
        gate_x_rows,
        gate_a_rows,
        a_param,
        y=None if y is None else swap_layout(y, channels_first),
        reset=reset,
        h0=h0,
        linear_scan=linear_scan,
        scan_input_dtype=scan_dtype,
    )
    return ScanOutput(swap_layout(output, channels_first), final_state)
