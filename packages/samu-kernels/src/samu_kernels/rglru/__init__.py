"""RG-LRU scan: PyTorch reference (naive), Triton kernels (chunk) and the public op (ops)."""

from samu_kernels.rglru.ops import rglru_scan

__all__ = ["rglru_scan"]
