"""The Griffin residual block: temporal mixing then a gated MLP, each pre-normed."""

from __future__ import annotations

from typing import Literal, overload

import torch
from torch import nn

from samu_modules.autocast import compute_dtype
from samu_modules.config import BlockConfig
from samu_modules.layer_choice import use_fused_layers
from samu_modules.mlp import MLPBlock
from samu_modules.norm import RMSNorm
from samu_modules.recurrent_block import RecurrentBlock
from samu_modules.state import BlockState
from samu_modules.validation import check_activations, check_segment_pos, check_state


class ResidualBlock(nn.Module):
    """One Griffin residual block with an RG-LRU or SAMU mixer.

    `x = x + recurrent_block(temporal_pre_norm(x))`, then
    `x = x + mlp_block(channel_pre_norm(x))`. The norms return the compute dtype (the
    autocast dtype under autocast), so the matrix products read them without a cast.
    `config.layers` picks the fused Triton norms/GELUs or the PyTorch composition.

    Args:
        config: the block's sizes, mixer, backend and controller.
        device: device of the parameters.
        dtype: dtype of the parameters (keep float32 and use autocast for bf16 compute).
    """

    def __init__(
        self,
        config: BlockConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise TypeError(f"config must be a BlockConfig, got {type(config).__name__}")
        self.config = config
        self.temporal_pre_norm = RMSNorm(config.width, device=device, dtype=dtype)
        self.recurrent_block = RecurrentBlock(config, device=device, dtype=dtype)
        self.channel_pre_norm = RMSNorm(config.width, device=device, dtype=dtype)
        self.mlp_block = MLPBlock(
            config.width,
            config.mlp_width,
            config.final_w_init_variance_scale,
            device=device,
            dtype=dtype,
        )

    def reset_parameters(self) -> None:
        """Re-draw every parameter from the initialisation."""
        self.temporal_pre_norm.reset_parameters()
        self.recurrent_block.reset_parameters()
        self.channel_pre_norm.reset_parameters()
        self.mlp_block.reset_parameters()

    @overload
    def forward(
        self,
        x: torch.Tensor,
        segment_pos: torch.Tensor | None = None,
        state: BlockState | None = None,
        return_state: Literal[False] = False,
    ) -> torch.Tensor: ...

    @overload
    def forward(
        self,
        x: torch.Tensor,
        segment_pos: torch.Tensor | None = None,
        state: BlockState | None = None,
        *,
        return_state: Literal[True],
    ) -> tuple[torch.Tensor, BlockState]: ...

    def forward(
        self,
        x: torch.Tensor,
        segment_pos: torch.Tensor | None = None,
        state: BlockState | None = None,
        return_state: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, BlockState]:
        """Apply the block to `x` [B, L, D].

        Args:
            x: activations [B, L, D], floating (float32 with float32 parameters; bf16
                matrix products under `torch.autocast`).
            segment_pos: [B, L] integer position of every token in its document, 0 where
                a document starts (packed documents); positions continue across pieces of
                a stream. None: no document starts inside `x` except at its first token
                when `state` is None.
            state: the state returned for the previous piece of the same sequences, or
                None to start fresh.
            return_state: also return the state after `x`.

        Returns:
            output [B, L, D] in x.dtype, or `(output, BlockState)` when `return_state`.

        Raises:
            ValueError: on a wrong rank, width, dtype or device of `x`, `segment_pos` or
                `state`.
        """
        x = check_activations(x, self.config.width)
        if segment_pos is not None:
            check_segment_pos(segment_pos, x)
        if state is not None:
            check_state(state, x, self.config.rnn_width, self.config.conv1d_width - 1)
        fused = use_fused_layers(self.config.layers, x, self.temporal_pre_norm.scale)
        dtype = compute_dtype(x)
        mixed, new_state = self.recurrent_block(
            self.temporal_pre_norm(x, dtype, fused=fused), segment_pos, state, fused=fused
        )
        residual, normalized = self.channel_pre_norm.add_and_normalize(mixed, x, dtype, fused=fused)
        output: torch.Tensor = (self.mlp_block(normalized, fused=fused) + residual).to(x.dtype)
        if return_state:
            return output, new_state
        return output
