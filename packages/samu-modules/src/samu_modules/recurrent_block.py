"""Griffin's recurrent block: two linear branches, the conv, the mixer, the output."""

from __future__ import annotations

import torch
from torch import nn

from samu_kernels.gated_gelu import gelu_tanh
from samu_modules.autocast import compute_dtype
from samu_modules.config import BlockConfig
from samu_modules.conv import Conv1D
from samu_modules.init import normal_variance_scaled_
from samu_modules.rglru import RGLRU
from samu_modules.samu import SAMU
from samu_modules.state import BlockState


def _build_mixer(
    config: BlockConfig, device: torch.device | str | None, dtype: torch.dtype | None
) -> RGLRU | SAMU:
    if config.architecture == "rglru":
        return RGLRU(config.rnn_width, config.num_heads, config.backend, device=device, dtype=dtype)
    assert config.controller is not None  # BlockConfig resolves SAMU's controller
    return SAMU(config.rnn_width, config.backend, config.controller, device=device, dtype=dtype)


def _single_document_positions(x: torch.Tensor) -> torch.Tensor:
    """[B, L] int64 positions 0..L-1: every row of `x` is one document."""
    batch, length = x.shape[:2]
    return torch.arange(length, device=x.device).expand(batch, length)


class RecurrentBlock(nn.Module):
    """`linear_out(mixer(Conv1D(linear_x(x)), gelu_tanh(linear_y(x))))`.

    Layers: `linear_y`, `linear_x` (D -> R, init N(0, 1/D)), `conv_1d` (width
    `conv1d_width`), `mixer` (`RGLRU` or `SAMU`), `linear_out` (R -> D, init
    N(0, (2/depth)/R)); all biases start at 0.
    """

    def __init__(
        self,
        config: BlockConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        width, rnn_width = config.width, config.rnn_width
        self.linear_y = nn.Linear(width, rnn_width, device=device, dtype=dtype)
        self.linear_x = nn.Linear(width, rnn_width, device=device, dtype=dtype)
        self.linear_out = nn.Linear(rnn_width, width, device=device, dtype=dtype)
        self.conv_1d = Conv1D(rnn_width, config.conv1d_width, device=device, dtype=dtype)
        self.mixer = _build_mixer(config, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """recurrentgemma's init (and the SAMU init for the SAMU mixer)."""
        for linear in (self.linear_x, self.linear_y):
            normal_variance_scaled_(linear.weight, 1.0, self.config.width)
            nn.init.zeros_(linear.bias)
        normal_variance_scaled_(
            self.linear_out.weight, self.config.final_w_init_variance_scale, self.config.rnn_width
        )
        nn.init.zeros_(self.linear_out.bias)
        self.conv_1d.reset_parameters()
        self.mixer.reset_parameters()

    def forward(
        self,
        x: torch.Tensor,
        segment_pos: torch.Tensor | None,
        state: BlockState | None,
        *,
        fused: bool = False,
    ) -> tuple[torch.Tensor, BlockState]:
        """Mix `x` [B, L, D] over time.

        Args:
            x: normalised activations [B, L, D] (in the compute dtype, so the two linear
                branches share one copy).
            segment_pos: [B, L] integer positions (0 starts a document), or None for no
                document start inside `x` but its first token when `state` is None.
            state: the state after the previous piece, or None to start from zeros.
            fused: run the GELU of the `y` branch with samu-kernels' Triton op (it saves
                only its input) instead of PyTorch's.

        Returns:
            `(output, state)`: output [B, L, D] (bf16 under bf16 autocast, else x.dtype)
            and the state after this piece.
        """
        dtype = compute_dtype(x)
        y_branch = self.linear_y(x)
        y = gelu_tanh(y_branch) if fused else nn.functional.gelu(y_branch, approximate="tanh")
        u, conv_state = self.conv_1d(
            self.linear_x(x), segment_pos, None if state is None else state.conv
        )
        scan_positions = segment_pos
        if segment_pos is None and state is None:
            # A fresh row is one document: its first token starts it (multiplier 1).
            scan_positions = _single_document_positions(x)
        mixed, h_last = self.mixer(
            u.to(dtype), y.to(dtype), scan_positions, None if state is None else state.h
        )
        return self.linear_out(mixed), BlockState(h=h_last, conv=conv_state)
