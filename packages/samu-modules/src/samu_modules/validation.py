"""Checks of a block's inputs, raising ValueError that names the argument.

They read only shapes, dtypes and devices (never tensor values), so they cost no GPU sync
and `torch.compile` turns them into guards.
"""

from __future__ import annotations

import torch

from samu_modules.autocast import carry_dtype, compute_dtype
from samu_modules.state import BlockState


def _require_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def _is_integer(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def check_activations(x: object, width: int) -> torch.Tensor:
    """`x` must be a floating tensor [B, L, width] with B, L >= 1."""
    x = _require_tensor("x", x)
    if x.ndim != 3 or x.shape[-1] != width or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"x must have shape [B, L, {width}] with B, L >= 1, got {list(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"x must have a floating dtype, got {x.dtype}")
    return x


def check_segment_pos(segment_pos: object, x: torch.Tensor) -> None:
    """`segment_pos` must be an integer tensor [B, L] on x's device."""
    segment_pos = _require_tensor("segment_pos", segment_pos)
    expected = list(x.shape[:2])
    if list(segment_pos.shape) != expected:
        raise ValueError(
            f"segment_pos must have shape {expected} (x's [B, L]), got {list(segment_pos.shape)}"
        )
    if not _is_integer(segment_pos.dtype):
        raise ValueError(f"segment_pos must have an integer dtype, got {segment_pos.dtype}")
    if segment_pos.device != x.device:
        raise ValueError(f"segment_pos must be on x's device {x.device}, got {segment_pos.device}")


def check_state(state: object, x: torch.Tensor, rnn_width: int, history: int) -> None:
    """`state` must be a BlockState for x's batch: h [B, R], conv [B, history, R].

    h must be float32 (float64 when the block computes in float64); conv any float dtype.
    """
    if not isinstance(state, BlockState):
        raise ValueError(f"state must be a BlockState, got {type(state).__name__}")
    batch = x.shape[0]
    h = _require_tensor("state.h", state.h)
    conv = _require_tensor("state.conv", state.conv)
    h_dtype = carry_dtype(compute_dtype(x))
    if list(h.shape) != [batch, rnn_width] or h.dtype != h_dtype:
        raise ValueError(
            f"state.h must be {h_dtype} with shape [{batch}, {rnn_width}], "
            f"got {h.dtype} {list(h.shape)}"
        )
    if list(conv.shape) != [batch, history, rnn_width] or not conv.is_floating_point():
        raise ValueError(
            f"state.conv must be floating with shape [{batch}, {history}, {rnn_width}], "
            f"got {conv.dtype} {list(conv.shape)}"
        )
    for name, tensor in (("state.h", h), ("state.conv", conv)):
        if tensor.device != x.device:
            raise ValueError(f"{name} must be on x's device {x.device}, got {tensor.device}")
