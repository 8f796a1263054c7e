"""Parameter initialisers of recurrentgemma (in place, without autograd)."""

from __future__ import annotations

import math

import torch

A_PARAM_MIN_RADIUS = 0.9
A_PARAM_MAX_RADIUS = 0.999


@torch.no_grad()
def normal_variance_scaled_(weight: torch.Tensor, variance_scale: float, fan_in: int) -> None:
    """Fill `weight` from N(0, variance_scale / fan_in)."""
    weight.normal_(mean=0.0, std=math.sqrt(variance_scale / fan_in))


@torch.no_grad()
def ring_init_a_param_(
    a_param: torch.Tensor,
    min_radius: float = A_PARAM_MIN_RADIUS,
    max_radius: float = A_PARAM_MAX_RADIUS,
) -> None:
    """Fill `a_param` so that the decay `exp(-softplus(a_param))` is uniform on a ring.

    The squared radius is uniform in [min_radius^2, max_radius^2]; `a_param` is the
    inverse softplus of `-log(radius)` (recurrentgemma's `rnn_param_init`).
    """
    eps = 1e-8
    a_param.uniform_(min_radius**2 + eps, max_radius**2 + eps)
    a_param.log_().mul_(0.5)
    a_param.neg_().exp_().sub_(1.0).log_()
