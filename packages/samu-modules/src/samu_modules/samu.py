"""The SAMU mixer: RG-LRU's decay law with a coordinate-wise controller."""

from __future__ import annotations

import math

import torch
from torch import nn

import samu_kernels
from samu_modules.autocast import carry_dtype
from samu_modules.init import ring_init_a_param_


class SAMU(nn.Module):
    """SAMU recurrence with its output gate and skip: `o = y * (h + skip * u)`.

    The controller's coordinates `z_a = gate_a_weight * u + gate_a_bias` and
    `z_x = gate_x_weight * u + gate_x_bias` (per channel, float32) give
    `log_a = -exp(log_c) * softplus(a_param) * sigmoid(z_a)`, `a = exp(log_a)` and
    `h_t = a_t * h_{t-1} + sqrt(1 - a_t^2) * sigmoid(z_x)_t * u_t` (decay 0 and multiplier 1
    at a document start), carried in float32.

    Parameters (3R + 4): `a_param` [R] (ring init as RG-LRU), `gate_a_weight` and
    `gate_x_weight` [R] (init N(0, 1)), scalars `gate_a_bias`, `gate_x_bias` (init 0),
    `log_c` (init log 8) and `skip` (init 0).
    """

    def __init__(
        self,
        width: int,
        backend: str,
        controller: str,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.width = width
        self.backend = backend
        self.controller = controller

        def vector() -> nn.Parameter:
            return nn.Parameter(torch.empty(width, device=device, dtype=dtype))

        def scalar() -> nn.Parameter:
            return nn.Parameter(torch.empty((), device=device, dtype=dtype))

        self.a_param = vector()
        self.gate_a_weight = vector()
        self.gate_x_weight = vector()
        self.gate_a_bias = scalar()
        self.gate_x_bias = scalar()
        self.log_c = scalar()
        self.skip = scalar()
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The SAMU init: at `log_c = log 8` its decay law is RG-LRU's."""
        ring_init_a_param_(self.a_param)
        self.gate_a_weight.normal_()
        self.gate_x_weight.normal_()
        self.gate_a_bias.zero_()
        self.gate_x_bias.zero_()
        self.log_c.fill_(math.log(8.0))
        self.skip.zero_()

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
            `(o, h_last)`: o = y * (h + skip * u) [B, L, R] in u.dtype, h_last [B, R] in h0's dtype.
        """
        dtype = carry_dtype(u.dtype)
        result = samu_kernels.samu_scan(
            u,
            y,
            self.a_param.to(dtype),
            self.gate_a_weight.to(dtype),
            self.gate_a_bias.to(dtype),
            self.gate_x_weight.to(dtype),
            self.gate_x_bias.to(dtype),
            self.log_c.to(dtype),
            self.skip.to(dtype),
            segment_pos=segment_pos,
            h0=h0,
            backend=self.backend,
            controller=self.controller,
        )
        return result.output, result.final_state
