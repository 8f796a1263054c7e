"""RMSNorm and residual add + RMSNorm: launchers, torch.library custom ops, public functions.

The public functions :func:`rms_norm` and :func:`add_rms_norm` run the Triton kernels through
custom ops (opaque to ``torch.compile``) when :func:`samu_kernels.fused_dispatch.triton_enabled`
says so (CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``), and the PyTorch
reference of :mod:`samu_kernels.rmsnorm.naive` otherwise.

The forward saves only the normalised input (``x``, or the sum ``s``), the scale and the
per-row ``rstd`` ``[N]`` float32; the backward recomputes the normalised value. The scale
gradient is reduced deterministically: every backward program writes its partial sum to its
own row of a ``[n_programs, D]`` buffer, which ``torch.sum`` then reduces.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton
from torch.library import triton_op, wrap_triton

from samu_kernels.fused_dispatch import (
    SUPPORTED_DTYPES,
    check_floating,
    check_same_device,
    triton_enabled,
)
from samu_kernels.rmsnorm.kernels import rms_norm_backward_kernel, rms_norm_forward_kernel
from samu_kernels.rmsnorm.naive import add_rms_norm_naive, rms_norm_naive

MAX_WIDTH = 8192
"""Widest row one program holds in a single tile."""

_TILE_ELEMENTS = 4096
_MAX_BLOCK_ROWS = 16
_BACKWARD_PROGRAMS_PER_SM = 4
_BACKWARD_PROGRAMS_INTERPRETER = 3


def tile_config(n_cols: int) -> tuple[int, int, int]:
    """``(BLOCK_ROWS, BLOCK_COLS, num_warps)`` for rows of ``n_cols`` (whole rows per tile)."""
    # int(): the tile sizes are compile-time constants, so a symbolic width (dynamic shapes
    # under torch.compile) is specialised; D is a constant of the model.
    block_cols = triton.next_power_of_2(int(n_cols))
    block_rows = max(1, min(_MAX_BLOCK_ROWS, _TILE_ELEMENTS // block_cols))
    num_warps = max(4, min(16, block_rows * block_cols // 512))
    return block_rows, block_cols, num_warps


@functools.cache
def _backward_program_target(device: torch.device) -> int:
    if device.type == "cuda":
        sm_count: int = torch.cuda.get_device_properties(device).multi_processor_count
        return _BACKWARD_PROGRAMS_PER_SM * sm_count
    return _BACKWARD_PROGRAMS_INTERPRETER


def backward_grid(n_rows: int, n_cols: int, device: torch.device) -> tuple[int, int]:
    """``(n_programs, rows_per_program)`` of the backward kernel for an ``[n_rows, n_cols]`` input.

    Depends only on the shape and the device, so the scale-gradient reduction order (and with
    it every bit of the gradient) is the same run after run.
    """
    block_rows, _, _ = tile_config(n_cols)
    target = _backward_program_target(device)
    tiles_per_program = max(1, triton.cdiv(triton.cdiv(n_rows, target), block_rows))
    rows_per_program = tiles_per_program * block_rows
    return triton.cdiv(n_rows, rows_per_program), rows_per_program


def launch_rms_norm_forward(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    scale: torch.Tensor,
    eps: float,
    *,
    y: torch.Tensor,
    residual_sum: torch.Tensor | None,
    rstd: torch.Tensor,
) -> None:
    """Write the forward of (residual add +) RMSNorm into the given buffers.

    Args:
        x: ``[N, D]`` contiguous, float32 or bfloat16.
        residual: ``[N, D]`` contiguous (any supported dtype), or ``None`` for plain RMSNorm.
        scale: ``[D]`` float32.
        eps: added to the mean square.
        y: ``[N, D]`` output (its dtype is the output dtype).
        residual_sum: ``[N, D]`` float32 output ``x + residual``; ``None`` iff ``residual`` is.
        rstd: ``[N]`` float32 output, ``rsqrt(mean(s^2) + eps)`` per row.
    """
    n_rows, n_cols = x.shape
    if n_rows == 0:
        return
    block_rows, block_cols, num_warps = tile_config(n_cols)
    has_residual = residual is not None
    wrap_triton(rms_norm_forward_kernel)[(triton.cdiv(n_rows, block_rows),)](
        x,
        residual if has_residual else x,
        scale,
        y,
        residual_sum if has_residual else y,
        rstd,
        n_rows,
        n_cols,
        eps,
        HAS_RESIDUAL=has_residual,
        BLOCK_ROWS=block_rows,
        BLOCK_COLS=block_cols,
        num_warps=num_warps,
    )


def launch_rms_norm_backward(
    dy: torch.Tensor,
    dsum: torch.Tensor | None,
    x: torch.Tensor,
    scale: torch.Tensor,
    rstd: torch.Tensor,
    *,
    dx: torch.Tensor,
    dresidual: torch.Tensor | None,
    dscale_partial: torch.Tensor,
) -> None:
    """Write the backward of (residual add +) RMSNorm into the given buffers.

    Args:
        dy: ``[N, D]`` contiguous gradient of ``y``.
        dsum: ``[N, D]`` contiguous gradient of the returned sum ``s``, or ``None``.
        x: ``[N, D]`` the saved normalised input (``x``, or ``s`` for the residual add).
        scale: ``[D]`` float32.
        rstd: ``[N]`` float32 saved by the forward.
        dx: ``[N, D]`` output, gradient of the normalised input (plus ``dsum``).
        dresidual: ``[N, D]`` output receiving the same gradient for the residual, or ``None``.
        dscale_partial: ``[n_programs, D]`` float32 output, ``n_programs`` from
            :func:`backward_grid`; its column sums are the scale gradient.
    """
    n_rows, n_cols = x.shape
    if n_rows == 0:
        return
    block_rows, block_cols, num_warps = tile_config(n_cols)
    n_programs, rows_per_program = backward_grid(n_rows, n_cols, x.device)
    wrap_triton(rms_norm_backward_kernel)[(n_programs,)](
        dy,
        dy if dsum is None else dsum,
        x,
        scale,
        rstd,
        dx,
        dx if dresidual is None else dresidual,
        dscale_partial,
        n_rows,
        n_cols,
        rows_per_program,
        HAS_DSUM=dsum is not None,
        HAS_DRESIDUAL=dresidual is not None,
        BLOCK_ROWS=block_rows,
        BLOCK_COLS=block_cols,
        num_warps=num_warps,
    )


def _scale_gradient(
    dy: torch.Tensor,
    dsum: torch.Tensor | None,
    x: torch.Tensor,
    scale: torch.Tensor,
    rstd: torch.Tensor,
    *,
    dx: torch.Tensor,
    dresidual: torch.Tensor | None,
) -> torch.Tensor:
    """Run the backward kernel into ``dx`` (and ``dresidual``); return the scale gradient."""
    n_rows, n_cols = x.shape
    n_programs, _ = backward_grid(n_rows, n_cols, x.device)
    dscale_partial = x.new_empty((n_programs, n_cols), dtype=torch.float32)
    launch_rms_norm_backward(
        dy, dsum, x, scale, rstd, dx=dx, dresidual=dresidual, dscale_partial=dscale_partial
    )
    return dscale_partial.sum(dim=0)


@triton_op("samu_kernels::rms_norm_forward", mutates_args=())
def rms_norm_forward(
    x: torch.Tensor, scale: torch.Tensor, eps: float, out_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Custom op: ``x [N, D]`` -> ``(y [N, D] out_dtype, rstd [N] float32)``."""
    y = x.new_empty(x.shape, dtype=out_dtype)
    rstd = x.new_empty(x.shape[0], dtype=torch.float32)
    launch_rms_norm_forward(x, None, scale, eps, y=y, residual_sum=None, rstd=rstd)
    return y, rstd


@triton_op("samu_kernels::rms_norm_backward", mutates_args=())
def rms_norm_backward(
    dy: torch.Tensor, x: torch.Tensor, scale: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Custom op: ``(dx [N, D] x.dtype, dscale [D] float32)``, gradients of ``rms_norm_forward``."""
    dx = torch.empty_like(x)
    dscale = _scale_gradient(dy, None, x, scale, rstd, dx=dx, dresidual=None)
    return dx, dscale


@triton_op("samu_kernels::add_rms_norm_forward", mutates_args=())
def add_rms_norm_forward(
    x: torch.Tensor, residual: torch.Tensor, scale: torch.Tensor, eps: float, out_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Custom op: ``x, residual [N, D]`` -> ``(s [N, D] float32, y [N, D] out_dtype, rstd [N])``."""
    residual_sum = x.new_empty(x.shape, dtype=torch.float32)
    y = x.new_empty(x.shape, dtype=out_dtype)
    rstd = x.new_empty(x.shape[0], dtype=torch.float32)
    launch_rms_norm_forward(x, residual, scale, eps, y=y, residual_sum=residual_sum, rstd=rstd)
    return residual_sum, y, rstd


@triton_op("samu_kernels::add_rms_norm_backward", mutates_args=())
def add_rms_norm_backward(
    dy: torch.Tensor,
    dsum: torch.Tensor | None,
    residual_sum: torch.Tensor,
    scale: torch.Tensor,
    rstd: torch.Tensor,
    *,
    x_dtype: torch.dtype,
    residual_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Custom op: ``(dx [N, D] x_dtype, dresidual [N, D] residual_dtype, dscale [D] float32)``."""
    dx = torch.empty_like(residual_sum, dtype=x_dtype)
    dresidual = torch.empty_like(residual_sum, dtype=residual_dtype)
    dscale = _scale_gradient(dy, dsum, residual_sum, scale, rstd, dx=dx, dresidual=dresidual)
    return dx, dresidual, dscale


def _rms_norm_setup_context(
    ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, scale, _eps, _out_dtype = inputs
    _y, rstd = output
    ctx.save_for_backward(x, scale, rstd)
    ctx.mark_non_differentiable(rstd)


def _rms_norm_autograd(
    ctx: Any, dy: torch.Tensor, _drstd: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, None, None]:
    x, scale, rstd = ctx.saved_tensors
    dx, dscale = rms_norm_backward(dy.contiguous(), x, scale, rstd)
    return dx, dscale, None, None


def _add_rms_norm_setup_context(
    ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
) -> None:
    x, residual, scale, _eps, _out_dtype = inputs
    residual_sum, _y, rstd = output
    ctx.save_for_backward(residual_sum, scale, rstd)
    ctx.mark_non_differentiable(rstd)
    ctx.input_dtypes = (x.dtype, residual.dtype)


def _add_rms_norm_autograd(
    ctx: Any, dsum: torch.Tensor | None, dy: torch.Tensor, _drstd: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None, None]:
    residual_sum, scale, rstd = ctx.saved_tensors
    x_dtype, residual_dtype = ctx.input_dtypes
    dx, dresidual, dscale = add_rms_norm_backward(
        dy.contiguous(),
        None if dsum is None else dsum.contiguous(),
        residual_sum,
        scale,
        rstd,
        x_dtype=x_dtype,
        residual_dtype=residual_dtype,
    )
    return dx, dresidual, dscale, None, None


rms_norm_forward.register_autograd(_rms_norm_autograd, setup_context=_rms_norm_setup_context)
add_rms_norm_forward.register_autograd(
    _add_rms_norm_autograd, setup_context=_add_rms_norm_setup_context
)


def _check_arguments(
    x: object, scale: object, eps: object, out_dtype: object
) -> tuple[torch.Tensor, torch.Tensor]:
    x = check_floating("x", x)
    if x.dim() == 0 or not 1 <= x.shape[-1] <= MAX_WIDTH:
        raise ValueError(f"x must have shape [..., D] with 1 <= D <= {MAX_WIDTH}, got {x.shape}")
    if not isinstance(scale, torch.Tensor):
        raise TypeError(f"scale must be a torch.Tensor, got {type(scale).__name__}")
    if scale.dtype != torch.float32:
        raise TypeError(f"scale must be float32, got {scale.dtype}")
    if scale.shape != (x.shape[-1],):
        raise ValueError(f"scale must have shape [D] = [{x.shape[-1]}], got {list(scale.shape)}")
    check_same_device("scale", scale, x)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps >= 0:
        raise ValueError(f"eps must be a non-negative number, got {eps!r}")
    if out_dtype is not None and out_dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"out_dtype must be None, torch.float32 or torch.bfloat16, got {out_dtype}")
    return x, scale


def rms_norm(
    x: torch.Tensor, scale: torch.Tensor, eps: float = 1e-6, *, out_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """RMSNorm ``y = x * rsqrt(mean(x^2, -1) + eps) * (1 + scale)``, math in float32.

    Args:
        x: ``[..., D]`` float32 or bfloat16, ``1 <= D <= 8192``.
        scale: ``[D]`` float32 (the norm's parameter, initialised to zero).
        eps: added to the mean square.
        out_dtype: dtype of ``y`` (float32 or bfloat16); ``x.dtype`` when ``None``. Passing
            bfloat16 fuses the cast for a following bfloat16 matrix product.

    Returns:
        ``y``: ``[..., D]`` in ``out_dtype``. Differentiable in ``x`` and ``scale``.
    """
    x, scale = _check_arguments(x, scale, eps, out_dtype)
    out_dtype = out_dtype or x.dtype
    if not triton_enabled(x):
        return rms_norm_naive(x, scale, eps, out_dtype=out_dtype)
    width = x.shape[-1]
    y, _rstd = rms_norm_forward(x.reshape(-1, width).contiguous(), scale, float(eps), out_dtype)
    result: torch.Tensor = y.view(x.shape)
    return result


def add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    scale: torch.Tensor,
    eps: float = 1e-6,
    *,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add then RMSNorm: ``s = x + residual`` (float32), ``y = rms_norm(s)``.

    Args:
        x: ``[..., D]`` float32 or bfloat16 (e.g. a bfloat16 matrix-product output).
        residual: ``[..., D]`` float32 or bfloat16 (the residual stream, usually float32).
        scale: ``[D]`` float32.
        eps: added to the mean square.
        out_dtype: dtype of ``y`` (float32 or bfloat16); float32 (the dtype of ``s``) when
            ``None``.

    Returns:
        ``(s, y)``: ``s`` ``[..., D]`` float32, the new residual stream; ``y`` ``[..., D]`` in
        ``out_dtype``. Differentiable in ``x``, ``residual`` and ``scale`` through both.
    """
    x, scale = _check_arguments(x, scale, eps, out_dtype)
    residual = check_floating("residual", residual)
    if residual.shape != x.shape:
        raise ValueError(
            f"residual must have the shape of x {list(x.shape)}, got {list(residual.shape)}"
        )
    check_same_device("residual", residual, x)
    out_dtype = out_dtype or torch.float32
    if not triton_enabled(x):
        return add_rms_norm_naive(x, residual, scale, eps, out_dtype=out_dtype)
    width = x.shape[-1]
    residual_sum, y, _rstd = add_rms_norm_forward(
        x.reshape(-1, width).contiguous(),
        residual.reshape(-1, width).contiguous(),
        scale,
        float(eps),
        out_dtype,
    )
    return residual_sum.view(x.shape), y.view(x.shape)
