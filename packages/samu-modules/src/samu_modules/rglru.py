"""The RG-LRU mixer of Griffin, computed by samu-kernels' `rglru_scan`."""

from __future__ import annotations

import torch
from torch import nn

import samu_kernels
from samu_modules.autocast import carry_dtype
from samu_modules.block_diagonal import BlockDiagonalLinear
from samu_modules.init import ring_init_a_param_


class RGLRU(nn.Module):
    """Real-Gated Linear Recurrent Unit with its output gate: `o = y * h`.

    With `gate_x = sigmoid(input_gate(u))`, `gate_a = sigmoid(a_gate(u))`,
    `log_a = -8 * gate_a * softplus(a_param)`, `a = exp(log_a)`:
    `h_t = a_t * h_{t-1} + sqrt(1 - a_t^2) * gate_x_t * u_t` (decay 0 and multiplier 1 at a
    document start), carried in float32.

    Parameters: `a_param` [R] (ring init, radius in [0.9, 0.999]); `input_gate` and
    `a_gate`, block-diagonal [num_heads, R/num_heads, R/num_heads] with bias.
    """

    def __init__(
        self,
        width: int,
        num_heads: int,
        backend: str,
        *,
        w_init_variance_scale: float = 1.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.width = width
        self.num_heads = num_heads
        self.backend = backend
        self.a_param = nn.Parameter(torch.empty(width, device=device, dtype=dtype))
        self.input_gate = BlockDiagonalLinear(
            width, num_heads, w_init_variance_scale, device=device, dtype=dtype
        )
        self.a_gate = BlockDiagonalLinear(
            width, num_heads, w_init_variance_scale, device=device, dtype=dtype
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """recurrentgemma's init."""
        self.input_gate.reset_parameters()
        self.a_gate.reset_parameters()
        ring_init_a_param_(self.a_param)

    def forward(
        self,
        u: torch.Tensor,
        y: torch.Tensor,
        segment_pos: torch.Tensor | None,
        h0: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the recurrence.

        Args:
            u: recurrence input [B, L, R] in the compute dtype.
            y: output gate [B, L, R], same dtype as u.
            segment_pos: [B, L] integer positions (0 starts a document) or None.
            h0: initial state [B, R] float32 (float64 for float64 u), or None for zeros.

        Returns:
            `(o, h_last)`: o = y * h [B, L, R] in u.dtype, h_last [B, R] in h0's dtype.
        """
        gate_x_logits = self.input_gate(u).to(u.dtype)
        gate_a_logits = self.a_gate(u).to(u.dtype)
        result = samu_kernels.rglru_scan(
            u,
            gate_x_logits,
            gate_a_logits,
            self.a_param.to(carry_dtype(u.dtype)),
            y,
            segment_pos=segment_pos,
            h0=h0,
            backend=self.backend,
        )
        return result.output, result.final_state
