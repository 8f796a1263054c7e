"""The Triton scan as PyTorch custom ops (``torch.library.triton_op``) with autograd.

``samu_kernels::scan_forward`` and ``samu_kernels::scan_backward`` launch the kernels
through :func:`torch.library.wrap_triton`, so ``torch.compile(fullgraph=True)`` traces
through them on a GPU; under ``TRITON_INTERPRET=1`` on CPU they run eagerly.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.library import triton_op, wrap_triton

from samu_kernels.common import channels_first_launch, launch
from samu_kernels.common.launch import ScanConfig, allocate_backward, allocate_forward

__all__ = ["scan"]


@triton_op("samu_kernels::scan_forward", mutates_args=())
def scan_forward(
    u: torch.Tensor,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    h0: torch.Tensor | None,
    config: list[int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward scan; returns (output, final_state, saved). See :func:`scan`."""
    scan_config = ScanConfig.from_list(config)
    launch_forward = (
        channels_first_launch.launch_forward
        if scan_config.channels_first
        else launch.launch_forward
    )
    result = launch_forward(
        wrap_triton,
        u,
        gate_x=gate_x,
        gate_a=gate_a,
        y=y,
        parameters=parameters,
        reset=reset,
        h0=h0,
        config=scan_config,
    )
    return result.output, result.final_state, result.saved


def _scan_forward_fake(
    u: torch.Tensor,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    h0: torch.Tensor | None,
    config: list[int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    result = allocate_forward(u, ScanConfig.from_list(config))
    return result.output, result.final_state, result.saved


@triton_op("samu_kernels::scan_backward", mutates_args=())
def scan_backward(
    grad_output: torch.Tensor,
    grad_final: torch.Tensor,
    saved: torch.Tensor,
    u: torch.Tensor,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    config: list[int],
) -> tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]:
    """Backward scan (``grad_final`` [B, R] fp32, or empty for zeros); returns (d_u, d_gate_x,
    d_gate_a, d_y, d_parameters, d_h0), an empty tensor for an input without a gradient in
    this mode."""
    scan_config = ScanConfig.from_list(config)
    launch_backward = (
        channels_first_launch.launch_backward
        if scan_config.channels_first
        else launch.launch_backward
    )
    result = launch_backward(
        wrap_triton,
        grad_output,
        grad_final,
        saved,
        u,
        gate_x=gate_x,
        gate_a=gate_a,
        y=y,
        parameters=parameters,
        reset=reset,
        config=scan_config,
    )
    return result.as_tuple()  # type: ignore[return-value]


def _scan_backward_fake(
    grad_output: torch.Tensor,
    grad_final: torch.Tensor,
    saved: torch.Tensor,
    u: torch.Tensor,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    config: list[int],
) -> tuple[
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
    torch.Tensor,
]:
    result = allocate_backward(u, gate_x, gate_a, parameters, ScanConfig.from_list(config))
    return result.as_tuple()  # type: ignore[return-value]


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, ...]) -> None:
    u, gate_x, gate_a, y, parameters, reset, h0, config = inputs
    ctx.save_for_backward(u, gate_x, gate_a, y, parameters, reset, output[2])
    ctx.config = config
    ctx.has_h0 = h0 is not None
    # Outputs nothing differentiates (the final state, usually; the saved states, always)
    # reach the backward as None, not as zeros autograd would fill: the launcher zeroes the
    # final state's gradient together with its counters, in one fill.
    ctx.mark_non_differentiable(output[2])
    ctx.set_materialize_grads(False)


def _backward(
    ctx: Any, grad_output: torch.Tensor | None, grad_final: torch.Tensor | None, _: Any
) -> tuple[torch.Tensor | None, ...]:
    u, gate_x, gate_a, y, parameters, reset, saved = ctx.saved_tensors
    grad_output = torch.zeros_like(u) if grad_output is None else grad_output.contiguous()
    # An empty final-state gradient stands for zeros (see _setup_context).
    grad_final = u.new_empty((0,), dtype=torch.float32) if grad_final is None else grad_final
    grads = scan_backward(
        grad_output,
        grad_final.contiguous(),
        saved,
        u,
        gate_x,
        gate_a,
        y,
        parameters,
        reset,
        ctx.config,
    )
    d_u, d_gate_x, d_gate_a, d_y, d_parameters, d_h0 = (
        grad if grad.numel() > 0 else None for grad in grads
    )
    return (
        d_u,
        d_gate_x,
        d_gate_a,
        d_y,
        d_parameters,
        None,
        d_h0 if ctx.has_h0 else None,
        None,
    )


scan_forward.register_fake(_scan_forward_fake)
scan_backward.register_fake(_scan_backward_fake)
scan_forward.register_autograd(_backward, setup_context=_setup_context)


def scan(
    u: torch.Tensor,
    *,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    h0: torch.Tensor | None,
    config: ScanConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Differentiable chunked scan. Returns (output [B, L, R] in u's dtype, final state
    [B, R] fp32). With ``config.channels_first`` every [B, L, R] tensor here is [B, R, L].

    Args:
        u: [B, L, R] bfloat16/float32 input (in the precomputed mode only read for the
            y*(h + skip*u) output, but always given: it sets the output dtype).
        gate_x, gate_a: RG-LRU's gate logits (u's dtype), or x and log_a (fp32, log_a -inf
            at a document start) in the precomputed mode; None for SAMU.
        y: [B, L, R] output gate (u's dtype) or None for output h.
        parameters: fp32, packed into one tensor so that its gradient is one buffer too:
            [R] a_param (RG-LRU's gates), [3 * R + 4] a_param, w_a, w_x then b_a, b_x,
            log_c, skip (SAMU's), [4] (precomputed gates with the y*(h + skip*u) output:
            skip last), or None.
        reset: [B, L] uint8, 1 where a document starts, or None.
        h0: [B, R] fp32 or None.
        config: the kernels' specialisation.
    """
    tensors = [
        t if t is None else t.contiguous() for t in (u, gate_x, gate_a, y, parameters, reset, h0)
    ]
    output, final_state, _ = scan_forward(*tensors, config.as_list())
    return output, final_state
