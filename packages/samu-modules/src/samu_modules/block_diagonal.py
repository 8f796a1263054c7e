"""Block-diagonal linear layer (the RG-LRU gate matrices)."""

from __future__ import annotations

import torch
from torch import nn

from samu_modules.init import normal_variance_scaled_


class BlockDiagonalLinear(nn.Module):
    """`width -> width` linear map made of `num_blocks` independent square blocks.

    Parameters: `w` [num_blocks, block_width, block_width] with init N(0, scale/block_width),
    `b` [num_blocks, block_width] with init 0.
    """

    def __init__(
        self,
        width: int,
        num_blocks: int,
        w_init_variance_scale: float = 1.0,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if width % num_blocks:
            raise ValueError(f"width ({width}) must be divisible by num_blocks ({num_blocks})")
        self.width = width
        self.num_blocks = num_blocks
        self.block_width = width // num_blocks
        self.w_init_variance_scale = w_init_variance_scale
        shape = (num_blocks, self.block_width, self.block_width)
        self.w = nn.Parameter(torch.empty(shape, device=device, dtype=dtype))
        self.b = nn.Parameter(torch.empty(num_blocks, self.block_width, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """recurrentgemma's init: normal weights, zero bias."""
        normal_variance_scaled_(self.w, self.w_init_variance_scale, self.block_width)
        nn.init.zeros_(self.b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the map to `x` [..., width]; returns [..., width].

        The product is a batched matmul (bf16 under autocast); the bias is added in the
        product's dtype, so the result is bf16 under bf16 autocast (no float32 copy).
        """
        blocks = x.reshape(*x.shape[:-1], self.num_blocks, self.block_width)
        product = torch.einsum("...hi,hij->...hj", blocks, self.w)
        y = product + self.b.to(product.dtype)
        return y.flatten(-2)
