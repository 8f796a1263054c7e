"""The gated MLP of the residual block."""

from __future__ import annotations

import torch
from torch import nn

from samu_modules.init import normal_variance_scaled_


class MLPBlock(nn.Module):
    """`ffw_down(gelu_tanh(gate) * value)` with `[gate, value] = ffw_up(x)`.

    Parameters: `ffw_up` (width -> 2 * expanded_width; rows `[:E]` the gate, `[E:]` the
    value; init N(0, 1/width), zero bias) and `ffw_down` (expanded_width -> width; init
    N(0, final_w_init_variance_scale/expanded_width), zero bias).
    """

    def __init__(
        self,
        width: int,
        expanded_width: int,
        final_w_init_variance_scale: float = 1.0,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.width = width
        self.expanded_width = expanded_width
        self.final_w_init_variance_scale = final_w_init_variance_scale
        self.ffw_up = nn.Linear(width, 2 * expanded_width, device=device, dtype=dtype)
        self.ffw_down = nn.Linear(expanded_width, width, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """recurrentgemma's init."""
        normal_variance_scaled_(self.ffw_up.weight, 1.0, self.width)
        nn.init.zeros_(self.ffw_up.bias)
        normal_variance_scaled_(
            self.ffw_down.weight, self.final_w_init_variance_scale, self.expanded_width
        )
        nn.init.zeros_(self.ffw_down.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the MLP to `x` [..., width]; returns [..., width]."""
        gate, value = self.ffw_up(x).chunk(2, dim=-1)
        output: torch.Tensor = self.ffw_down(nn.functional.gelu(gate, approximate="tanh") * value)
        return output
