"""RMSNorm and fused residual add + RMSNorm: Triton kernels behind torch.library custom ops."""

from samu_kernels.rmsnorm.ops import add_rms_norm, rms_norm

__all__ = ["add_rms_norm", "rms_norm"]
