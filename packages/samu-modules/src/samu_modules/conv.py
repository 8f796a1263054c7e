"""Causal depthwise temporal convolution that never mixes documents."""

from __future__ import annotations

import torch
from torch import nn

from samu_modules.init import normal_variance_scaled_


class Conv1D(nn.Module):
    """Depthwise causal convolution over time: `out_t = b + sum_s w[W-1-s] * x_{t-s}`.

    Tap `s` reads `x_{t-s}` only when no document starts in `(t-s, t]`, so tokens of an
    earlier document are never mixed in. The `W - 1` inputs before the sequence come from
    the streaming state (zeros without one).

    Parameters: `w` [temporal_width, width] with init N(0, 0.01/temporal_width) and `b`
    [width] with init 0 (recurrentgemma's).
    """

    def __init__(
        self,
        width: int,
        temporal_width: int = 4,
        w_init_variance_scale: float = 0.01,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.width = width
        self.temporal_width = temporal_width
        self.w_init_variance_scale = w_init_variance_scale
        self.w = nn.Parameter(torch.empty(temporal_width, width, device=device, dtype=dtype))
        self.b = nn.Parameter(torch.empty(width, device=device, dtype=dtype))
        self.reset_parameters()

    @property
    def history(self) -> int:
        """Number of past inputs a step reads, `temporal_width - 1` (the state length)."""
        return self.temporal_width - 1

    def reset_parameters(self) -> None:
        """recurrentgemma's init."""
        normal_variance_scaled_(self.w, self.w_init_variance_scale, self.temporal_width)
        nn.init.zeros_(self.b)

    def forward(
        self,
        x: torch.Tensor,
        segment_pos: torch.Tensor | None = None,
        state: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Convolve `x` [B, L, width] over time, in x's dtype.

        Every tap is one multiply-add (`torch.addcmul`) with the parameters cast to x's
        dtype: for bfloat16 `x` (under autocast) the arithmetic of a tap runs in float32
        and rounds once, and no float32 [B, L, width] tensor is made.

        Args:
            x: inputs [B, L, width], any float dtype.
            segment_pos: [B, L] integer positions, 0 where a document starts; None for
                no document start inside `x` (no mask is then computed).
            state: the `history` inputs before `x` [B, history, width] (cast to x.dtype);
                None for zeros.

        Returns:
            `(output, new_state)`: output [B, L, width] in x.dtype and new_state
            [B, history, width] in x.dtype, the last `history` inputs with those of a
            finished document zeroed.
        """
        length = x.shape[1]
        history = self.history
        if state is None:
            padded = nn.functional.pad(x, (0, 0, history, 0))
        else:
            padded = torch.cat([state.to(x.dtype), x], dim=1)
        document = None
        if segment_pos is not None:
            # Document index of every padded position; the state is document 0.
            starts = torch.cumsum(segment_pos == 0, dim=1)
            document = nn.functional.pad(starts, (history, 0))

        weight = self.w.to(x.dtype)
        # Tap 0 reads x through `padded` too, so only `padded` is kept for the backward.
        output = torch.addcmul(self.b.to(x.dtype), padded[:, history:], weight[history])
        for shift in range(1, self.temporal_width):
            begin = history - shift
            window = padded[:, begin : begin + length]
            if document is not None:
                same = document[:, begin : begin + length] == document[:, history:]
                window = window * same.unsqueeze(-1).to(x.dtype)
            output = torch.addcmul(output, window, weight[history - shift])

        new_state = padded[:, length:]
        if document is None:
            # A copy, so a state kept for streaming does not hold all of `padded`.
            return output, new_state.clone()
        keep = document[:, length:] == document[:, -1:]
        return output, new_state * keep.unsqueeze(-1).to(x.dtype)
