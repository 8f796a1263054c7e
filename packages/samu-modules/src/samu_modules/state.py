"""Streaming/decoding state of a residual block."""

from __future__ import annotations

from typing import NamedTuple

import torch


class BlockState(NamedTuple):
    """What a block carries from one piece of a sequence to the next.

    Attributes:
        h: recurrence state [B, R], float32 (float64 for a block computing in float64).
        conv: the convolution's last `conv1d_width - 1` inputs [B, conv1d_width - 1, R],
            in the dtype of the convolution's input (float32, or bfloat16 under bf16
            autocast); inputs of a finished document are zeroed.
    """

    h: torch.Tensor
    conv: torch.Tensor

    @classmethod
    def empty(
        cls,
        batch_size: int,
        rnn_width: int,
        conv1d_width: int = 4,
        device: torch.device | str | None = None,
        conv_dtype: torch.dtype = torch.float32,
    ) -> BlockState:
        """A zero state: what a block starts from when no state is given."""
        return cls(
            h=torch.zeros(batch_size, rnn_width, device=device, dtype=torch.float32),
            conv=torch.zeros(
                batch_size, conv1d_width - 1, rnn_width, device=device, dtype=conv_dtype
            ),
        )
