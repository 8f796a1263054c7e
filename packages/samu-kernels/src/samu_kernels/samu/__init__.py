"""SAMU scan: PyTorch reference (naive), Triton kernels (chunk) and the public op (ops)."""

from samu_kernels.samu.ops import samu_scan

__all__ = ["samu_scan"]
