"""The gated MLP of the residual block."""

from __future__ import annotations

import torch
from torch import nn

from samu_kernels.gated_gelu import gelu_tanh_gate
from samu_modules.autocast import compute_dtype
from samu_modules.init import normal_variance_scaled_
from samu_modules.linear import linear_matmul_bias_grad


def split_linear(x: torch.Tensor, linear: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """`linear(x).chunk(2, -1)` as two contiguous products, one per half of the weight rows.

    The halves of one product are strided views; a kernel that reads contiguous tensors
    would copy both. Here the weight and bias are cast once to x's compute dtype and split
    into row blocks (contiguous views), so each product is written contiguous and the
    backward stacks the two weight gradients into one.

    Args:
        x: [..., in_features].
        linear: a layer with an even `out_features` and a bias.

    Returns:
        `(first, second)`, each [..., out_features / 2] in the compute dtype of `x`.
    """
    dtype = compute_dtype(x)
    first_weight, second_weight = linear.weight.to(dtype).chunk(2, dim=0)
    first_bias, second_bias = linear.bias.to(dtype).chunk(2, dim=0)
    x = x.to(dtype)
    return (
        nn.functional.linear(x, first_weight, first_bias),
        nn.functional.linear(x, second_weight, second_bias),
    )


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

    def forward(self, x: torch.Tensor, *, fused: bool = False) -> torch.Tensor:
        """Apply the MLP to `x` [..., width]; returns [..., width].

        `fused` computes the gate and the value as two contiguous products (`split_linear`)
        and the gated GELU with samu-kernels' Triton op (float32/bfloat16), which saves only
        the gate and the value for the backward. Otherwise the gate and value are views of
        one product and the GELU and product are PyTorch ops (Inductor fuses them), and the
        `ffw_up` bias gradient is a matrix product (`linear_matmul_bias_grad`), so that
        Inductor does not fuse that column sum into the GELU-gate backward.
        """
        if fused:
            hidden = gelu_tanh_gate(*split_linear(x, self.ffw_up))
        else:
            up = linear_matmul_bias_grad(x, self.ffw_up.weight, self.ffw_up.bias)
            gate, value = up.chunk(2, dim=-1)
            hidden = nn.functional.gelu(gate, approximate="tanh") * value
        output: torch.Tensor = self.ffw_down(hidden)
        return output
