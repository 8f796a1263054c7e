"""Tanh-approximate GELU and GELU-gated product: launchers, custom ops, public functions.

The public functions :func:`gelu_tanh_gate` (the MLP's ``gelu_tanh(gate) * value``) and
:func:`gelu_tanh` (the RecurrentBlock's ``y`` branch) run the Triton kernels through custom ops
(opaque to ``torch.compile``) when :func:`samu_kernels.fused_dispatch.triton_enabled` says so
(CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``), and the PyTorch reference of
:mod:`samu_kernels.gated_gelu.naive` otherwise.

The forward saves only its inputs; the backward recomputes the GELU and its derivative from
them, so neither the GELU nor the product is ever kept for the backward.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
from torch.library import triton_op, wrap_triton

from samu_kernels.fused_dispatch import check_floating, check_same_device, triton_enabled
from samu_kernels.gated_gelu.kernels import gelu_tanh_backward_kernel, gelu_tanh_forward_kernel
from samu_kernels.gated_gelu.naive import gelu_tanh_gate_naive, gelu_tanh_naive

BLOCK = 4096
"""Elements per program."""

_NUM_WARPS = 8


def launch_gelu_tanh_forward(
    x: torch.Tensor, value: torch.Tensor | None, *, out: torch.Tensor
) -> None:
    """Write ``gelu_tanh(x)`` (times ``value`` unless ``None``) into ``out``.

    Args:
        x: contiguous, any shape, float32 or bfloat16.
        value: contiguous, the shape of ``x``, or ``None``.
        out: contiguous output of the shape of ``x``.
    """
    n_elements = x.numel()
    if n_elements == 0:
        return
    wrap_triton(gelu_tanh_forward_kernel)[(triton.cdiv(n_elements, BLOCK),)](
        x,
        x if value is None else value,
        out,
        n_elements,
        HAS_VALUE=value is not None,
        BLOCK=BLOCK,
        num_warps=_NUM_WARPS,
    )


def launch_gelu_tanh_backward(
    dout: torch.Tensor,
    x: torch.Tensor,
    value: torch.Tensor | None,
    *,
    dx: torch.Tensor,
    dvalue: torch.Tensor | None,
) -> None:
    """Write the gradients of ``gelu_tanh(x)`` (times ``value``) into ``dx`` (and ``dvalue``).

    Args:
        dout: contiguous gradient of the output, the shape of ``x``.
        x: contiguous saved input (the gate), float32 or bfloat16.
        value: contiguous saved value, or ``None`` for the plain GELU.
        dx: contiguous output, gradient of ``x``.
        dvalue: contiguous output, gradient of ``value``; ``None`` iff ``value`` is.
    """
    n_elements = x.numel()
    if n_elements == 0:
        return
    wrap_triton(gelu_tanh_backward_kernel)[(triton.cdiv(n_elements, BLOCK),)](
        dout,
        x,
        x if value is None else value,
        dx,
        dx if dvalue is None else dvalue,
        n_elements,
        HAS_VALUE=value is not None,
        BLOCK=BLOCK,
        num_warps=_NUM_WARPS,
    )


@triton_op("samu_kernels::gelu_tanh_gate_forward", mutates_args=())
def gelu_tanh_gate_forward(gate: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Custom op: contiguous ``gate, value [...]`` -> ``gelu_tanh(gate) * value`` in their dtype."""
    out = torch.empty_like(gate)
    launch_gelu_tanh_forward(gate, value, out=out)
    return out


@triton_op("samu_kernels::gelu_tanh_gate_backward", mutates_args=())
def gelu_tanh_gate_backward(
    dout: torch.Tensor, gate: torch.Tensor, value: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Custom op: ``(dgate, dvalue)`` of :func:`gelu_tanh_gate_forward`, in the inputs' dtype."""
    dgate = torch.empty_like(gate)
    dvalue = torch.empty_like(value)
    launch_gelu_tanh_backward(dout, gate, value, dx=dgate, dvalue=dvalue)
    return dgate, dvalue


@triton_op("samu_kernels::gelu_tanh_forward", mutates_args=())
def gelu_tanh_forward(x: torch.Tensor) -> torch.Tensor:
    """Custom op: contiguous ``x [...]`` -> ``gelu_tanh(x)`` in ``x.dtype``."""
    out = torch.empty_like(x)
    launch_gelu_tanh_forward(x, None, out=out)
    return out


@triton_op("samu_kernels::gelu_tanh_backward", mutates_args=())
def gelu_tanh_backward(dout: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Custom op: ``dx`` of :func:`gelu_tanh_forward`, in ``x.dtype``."""
    dx = torch.empty_like(x)
    launch_gelu_tanh_backward(dout, x, None, dx=dx, dvalue=None)
    return dx


def _gelu_tanh_gate_setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    gate, value = inputs
    ctx.save_for_backward(gate, value)


def _gelu_tanh_gate_autograd(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    gate, value = ctx.saved_tensors
    dgate, dvalue = gelu_tanh_gate_backward(dout.contiguous(), gate, value)
    return dgate, dvalue


def _gelu_tanh_setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    (x,) = inputs
    ctx.save_for_backward(x)


def _gelu_tanh_autograd(ctx: Any, dout: torch.Tensor) -> torch.Tensor:
    (x,) = ctx.saved_tensors
    dx: torch.Tensor = gelu_tanh_backward(dout.contiguous(), x)
    return dx


gelu_tanh_gate_forward.register_autograd(
    _gelu_tanh_gate_autograd, setup_context=_gelu_tanh_gate_setup_context
)
gelu_tanh_forward.register_autograd(_gelu_tanh_autograd, setup_context=_gelu_tanh_setup_context)


def gelu_tanh_gate(gate: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """GELU-gated product ``gelu_tanh(gate) * value``, math in float32.

    Args:
        gate: ``[..., F]`` float32 or bfloat16.
        value: ``[..., F]``, the shape, dtype and device of ``gate``.

    Returns:
        ``[..., F]`` in the inputs' dtype. Differentiable in ``gate`` and ``value``.
    """
    gate = check_floating("gate", gate)
    value = check_floating("value", value)
    if value.shape != gate.shape or value.dtype != gate.dtype:
        raise ValueError(
            f"value must have the shape and dtype of gate ({list(gate.shape)}, {gate.dtype}), "
            f"got ({list(value.shape)}, {value.dtype})"
        )
    check_same_device("value", value, gate)
    if not triton_enabled(gate):
        return gelu_tanh_gate_naive(gate, value)
    out: torch.Tensor = gelu_tanh_gate_forward(gate.contiguous(), value.contiguous())
    return out


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """Tanh-approximate GELU ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, math in float32.

    Args:
        x: ``[...]`` float32 or bfloat16.

    Returns:
        ``[...]`` in ``x.dtype``. Differentiable in ``x``.
    """
    x = check_floating("x", x)
    if not triton_enabled(x):
        return gelu_tanh_naive(x)
    out: torch.Tensor = gelu_tanh_forward(x.contiguous())
    return out
