"""recurrentgemma's own torch `ResidualBlock`, as published, as a benchmark module.

The block is `recurrentgemma.torch.modules.ResidualBlock(width=D,
mlp_expanded_width=3*D, num_heads=16, temporal_block_type=RECURRENT, lru_width=R,
final_w_init_variance_scale=2/depth)` with recurrentgemma's own initialisation: the
RG-LRU architecture of samu-modules, with the same parameter count. Its forward needs
`segment_pos` and returns `(output, cache)`; :class:`RecurrentGemmaBlock` passes one
document per row (`segment_pos = arange(L)` for every row) and returns the output only,
so the protocol times it like any block. Its scan is a Python loop over time.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from samu_bench.plan import CaseSpec, Row

__all__ = [
    "RECURRENTGEMMA_HEADS",
    "RecurrentGemmaBlock",
    "build_recurrentgemma_block",
    "load_recurrentgemma",
]

RECURRENTGEMMA_HEADS = 16
"""Heads of the RG-LRU gates (Griffin's and samu-modules' default)."""

_MLP_EXPANSION = 3
_UNUSED_ATTENTION_WINDOW = 2048
"""`attention_window_size` is required by the constructor but unused by a RECURRENT block."""


def load_recurrentgemma() -> tuple[ModuleType, ModuleType]:
    """Import recurrentgemma's torch half: `(recurrentgemma.torch.modules, recurrentgemma.common)`.

    Raises:
        ImportError: recurrentgemma[torch] is not installed (it needs Python >= 3.11) or
            fails to import.
    """
    modules = importlib.import_module("recurrentgemma.torch.modules")
    common = importlib.import_module("recurrentgemma.common")
    return modules, common


class RecurrentGemmaBlock(nn.Module):
    """recurrentgemma's torch `ResidualBlock` on one document per batch row.

    Args:
        width: model width D.
        rnn_width: RG-LRU width R (a multiple of 16).
        depth: depth of the model the block is taken from (init scale 2 / depth).
        device: device of the parameters (float32).
    """

    def __init__(
        self, width: int, rnn_width: int, depth: int, device: torch.device | str | None = None
    ) -> None:
        super().__init__()
        for name, value in (("width", width), ("rnn_width", rnn_width), ("depth", depth)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if rnn_width % RECURRENTGEMMA_HEADS:
            raise ValueError(
                f"rnn_width must be a multiple of {RECURRENTGEMMA_HEADS} (RG-LRU heads), "
                f"got {rnn_width}"
            )
        modules, common = load_recurrentgemma()
        self.block: nn.Module = modules.ResidualBlock(
            width=width,
            mlp_expanded_width=_MLP_EXPANSION * width,
            num_heads=RECURRENTGEMMA_HEADS,
            attention_window_size=_UNUSED_ATTENTION_WINDOW,
            temporal_block_type=common.TemporalBlockType.RECURRENT,
            lru_width=rnn_width,
            final_w_init_variance_scale=2.0 / depth,
            device=device,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the block to x [B, L, D] (float32; bf16 products under autocast).

        Returns:
            [B, L, D], the block's output (its cache is not computed).
        """
        if x.dim() != 3:
            raise ValueError(f"x must be [B, L, D], got shape {tuple(x.shape)}")
        batch, length, _ = x.shape
        positions = torch.arange(length, device=x.device).expand(batch, length)
        output, _ = self.block(x, positions, None, return_cache=False)
        result: torch.Tensor = output
        return result


def build_recurrentgemma_block(case: CaseSpec, row: Row, device: torch.device) -> nn.Module:
    """The `Row.build_module` of the recurrentgemma peer: its block at the case's sizes."""
    del row  # the row only names the peer; the sizes come from the case
    return RecurrentGemmaBlock(case.width, case.rnn_width, case.depth, device=device)
