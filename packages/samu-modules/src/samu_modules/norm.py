"""RMSNorm with a zero-initialised `(1 + scale)` gain."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """`x * rsqrt(mean(x^2, -1) + eps) * (1 + scale)` over the last dimension.

    Parameters: `scale` [width], initialised to 0 (identity gain).
    """

    def __init__(
        self,
        width: int,
        eps: float = 1e-6,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.width = width
        self.eps = eps
        self.scale = nn.Parameter(torch.empty(width, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Zero the scale."""
        nn.init.zeros_(self.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise `x` [..., width] (any float dtype); returns the same shape."""
        variance = torch.mean(torch.square(x), dim=-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * (self.scale + 1)
