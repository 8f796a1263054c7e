"""Up-front checks of the scan ops' arguments, with errors that name the argument."""

from __future__ import annotations

import torch

__all__ = [
    "check_channel_param",
    "check_initial_state",
    "check_scalar_param",
    "check_segment_pos",
    "check_sequence",
    "check_sequence_like",
    "parameter_dtype",
]

_TRITON_DTYPES = (torch.bfloat16, torch.float32)
_REFERENCE_DTYPES = (torch.bfloat16, torch.float32, torch.float64)


def _require_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def check_sequence(
    name: str, value: object, *, allow_float64: bool, channels_first: bool = False
) -> tuple[int, int, int]:
    """Check a [B, L, R] sequence input ([B, R, L] if ``channels_first``; bfloat16/float32,
    float64 if allowed); return its three sizes in its own order."""
    tensor = _require_tensor(name, value)
    if tensor.ndim != 3:
        layout = "[B, R, L]" if channels_first else "[B, L, R]"
        raise ValueError(f"{name} must have shape {layout}, got shape {tuple(tensor.shape)}")
    allowed = _REFERENCE_DTYPES if allow_float64 else _TRITON_DTYPES
    if tensor.dtype not in allowed:
        raise TypeError(f"{name} must have dtype in {allowed}, got {tensor.dtype}")
    if min(tensor.shape) < 1:
        raise ValueError(f"{name} must have B, L, R >= 1, got shape {tuple(tensor.shape)}")
    first, second, third = tensor.shape
    return first, second, third


def check_sequence_like(name: str, value: object, reference: torch.Tensor) -> None:
    """Check that ``value`` has the shape, dtype and device of ``reference`` (the input u)."""
    tensor = _require_tensor(name, value)
    if tensor.shape != reference.shape:
        raise ValueError(
            f"{name} must have the shape of u {tuple(reference.shape)}, got {tuple(tensor.shape)}"
        )
    if tensor.dtype != reference.dtype:
        raise TypeError(f"{name} must have the dtype of u ({reference.dtype}), got {tensor.dtype}")
    if tensor.device != reference.device:
        raise ValueError(f"{name} must be on u's device {reference.device}, got {tensor.device}")


def parameter_dtype(compute_dtype: torch.dtype) -> torch.dtype:
    """The dtype parameters and states must have: float64 for float64 inputs, else float32."""
    return torch.float64 if compute_dtype == torch.float64 else torch.float32


def _check_parameter(name: str, tensor: torch.Tensor, reference: torch.Tensor) -> None:
    expected = parameter_dtype(reference.dtype)
    if tensor.dtype != expected:
        raise TypeError(f"{name} must have dtype {expected}, got {tensor.dtype}")
    if tensor.device != reference.device:
        raise ValueError(f"{name} must be on u's device {reference.device}, got {tensor.device}")


def check_channel_param(name: str, value: object, reference: torch.Tensor) -> None:
    """Check a per-channel parameter: shape [R], float32 (float64 for float64 inputs)."""
    tensor = _require_tensor(name, value)
    width = reference.shape[-1]
    if tensor.shape != (width,):
        raise ValueError(f"{name} must have shape [R] = [{width}], got {tuple(tensor.shape)}")
    _check_parameter(name, tensor, reference)


def check_scalar_param(name: str, value: object, reference: torch.Tensor) -> None:
    """Check a scalar parameter: a 0-d float32 tensor (float64 for float64 inputs)."""
    tensor = _require_tensor(name, value)
    if tensor.ndim != 0:
        raise ValueError(f"{name} must be a 0-d tensor, got shape {tuple(tensor.shape)}")
    _check_parameter(name, tensor, reference)


def check_segment_pos(value: object, reference: torch.Tensor) -> None:
    """Check ``segment_pos``: [B, L] of an integer dtype on u's device."""
    tensor = _require_tensor("segment_pos", value)
    batch, length = reference.shape[:2]
    if tensor.shape != (batch, length):
        raise ValueError(
            f"segment_pos must have shape [B, L] = [{batch}, {length}], got {tuple(tensor.shape)}"
        )
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise TypeError(f"segment_pos must have an integer dtype, got {tensor.dtype}")
    if tensor.device != reference.device:
        raise ValueError(
            f"segment_pos must be on u's device {reference.device}, got {tensor.device}"
        )


def check_initial_state(value: object, reference: torch.Tensor) -> None:
    """Check ``h0``: [B, R] float32 (float64 for float64 inputs) on u's device."""
    tensor = _require_tensor("h0", value)
    batch, width = reference.shape[0], reference.shape[2]
    if tensor.shape != (batch, width):
        raise ValueError(
            f"h0 must have shape [B, R] = [{batch}, {width}], got {tuple(tensor.shape)}"
        )
    _check_parameter("h0", tensor, reference)
