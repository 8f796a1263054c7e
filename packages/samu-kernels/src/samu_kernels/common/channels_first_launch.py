"""Launchers of the channels-first kernels (``channels_first.py``): [B, R, L] sequences."""

from __future__ import annotations

from typing import Any

import torch
import triton

from samu_kernels.common import launch
from samu_kernels.common.channels_first import (
    TimeTile,
    backward_channels_first_kernel,
    forward_channels_first_kernel,
    time_tile,
)
from samu_kernels.common.launch import (
    BackwardResult,
    ForwardResult,
    ScanConfig,
    Wrap,
    allocate_backward,
    allocate_forward,
    or_placeholder,
    shared_sfu_flag,
    split_parameters,
    sum_partials,
    zeroed_buffer,
)

__all__ = ["launch_backward", "launch_forward"]


def _flags(
    config: ScanConfig, tile: TimeTile, u: torch.Tensor, reset: torch.Tensor | None
) -> dict[str, Any]:
    length = u.shape[2]
    return {
        "GATE_MODE": int(config.gate_mode),
        "OUT_MODE": int(config.out_mode),
        "SHARED_SFU": shared_sfu_flag(config, u.dtype),
        "HAS_RESETS": reset is not None,
        "CB": tile.channels,
        "TT": tile.steps,
        "FULL_TILES": length % tile.steps == 0,
        "num_warps": tile.warps,
    }


def _inputs(
    u: torch.Tensor,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    config: ScanConfig,
) -> list[torch.Tensor]:
    """The kernels' first seven pointer arguments (u, gate_x, gate_a, y, channel rows,
    scalars, resets), u standing in for what the mode does not read."""
    channel, scalars = split_parameters(parameters, config, u.shape[1])
    return [or_placeholder(t, u) for t in (u, gate_x, gate_a, y, channel, scalars, reset)]


def launch_forward(
    wrap: Wrap,
    u: torch.Tensor,
    *,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    h0: torch.Tensor | None,
    config: ScanConfig,
) -> ForwardResult:
    """The forward over [B, R, L] sequences (all tensors contiguous; ``reset`` [B, L]
    uint8, ``h0`` [B, R] fp32): output [B, R, L], final state [B, R] and the tiles'
    checkpoints [B, R, cdiv(L, TT)]."""
    result = allocate_forward(u, config)
    batch, width, length = u.shape
    tile = time_tile(length)
    wrap(forward_channels_first_kernel)[(triton.cdiv(width, tile.channels), batch)](
        *_inputs(u, gate_x, gate_a, y, parameters, reset, config),
        or_placeholder(h0, u),
        result.output,
        result.final_state,
        result.saved,
        length,
        width,
        result.saved.shape[2],
        HAS_H0=h0 is not None,
        **_flags(config, tile, u, reset),
    )
    return result


def launch_backward(
    wrap: Wrap,
    grad_output: torch.Tensor,
    grad_final: torch.Tensor,
    saved: torch.Tensor,
    u: torch.Tensor,
    *,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    config: ScanConfig,
) -> BackwardResult:
    """The backward of :func:`launch_forward` (``grad_final`` [B, R] fp32, or empty where
    no gradient reached the final state); the parameters' partial sums [B, P, R] are summed
    over B by ``torch.sum`` (a fixed order: bit-reproducible)."""
    grads = allocate_backward(u, gate_x, gate_a, parameters, config)
    batch, width, length = u.shape
    tile = time_tile(length)
    if grad_final.numel() == 0:
        grad_final = zeroed_buffer(u, (batch, width), torch.float32)
    partial = launch.new_buffer(u, (batch, config.num_partials, width), torch.float32)
    wrap(backward_channels_first_kernel)[(triton.cdiv(width, tile.channels), batch)](
        *_inputs(u, gate_x, gate_a, y, parameters, reset, config),
        grad_output,
        grad_final,
        saved,
        *(or_placeholder(grad, u) for grad in grads.as_tuple()[:4]),
        grads.d_h0,
        partial,
        length,
        width,
        saved.shape[2],
        **_flags(config, tile, u, reset),
    )
    sum_partials(partial, grads, config)
    return grads
