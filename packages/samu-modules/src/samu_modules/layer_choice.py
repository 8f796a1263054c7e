"""Whether a forward pass runs the fused Triton layers or the PyTorch composition."""

from __future__ import annotations

import torch

from samu_kernels.fused_dispatch import SUPPORTED_DTYPES, triton_enabled
from samu_modules.config import Layers


def use_fused_layers(layers: Layers, x: torch.Tensor, parameter: torch.Tensor) -> bool:
    """Whether to run the norms and GELUs through samu-kernels' fused ops.

    Args:
        layers: the config's choice; "fused" and "torch" are taken as they are.
        x: the block input [B, L, D].
        parameter: a norm scale [D] of the block (its dtype is the parameters' dtype).

    Returns:
        For "auto": True in eager mode (`torch.compiler.is_compiling()` is False, so
        Inductor sees the PyTorch composition it fuses best) when Triton serves `x` (CUDA,
        or TRITON_INTERPRET=1 on the CPU), `x` is float32/bfloat16 and the parameters are
        float32 (what the fused ops take).
    """
    if layers != "auto":
        return layers == "fused"
    if torch.compiler.is_compiling():
        return False
    return x.dtype in SUPPORTED_DTYPES and parameter.dtype == torch.float32 and triton_enabled(x)
