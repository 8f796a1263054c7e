"""Tanh-approximate GELU and GELU-gated product: Triton kernels behind torch.library custom ops."""

from samu_kernels.gated_gelu.ops import gelu_tanh, gelu_tanh_gate

__all__ = ["gelu_tanh", "gelu_tanh_gate"]
