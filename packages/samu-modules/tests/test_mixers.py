"""The RG-LRU and SAMU mixers against float64 loops written from the spec's formulas."""

from __future__ import annotations

import math

import pytest
import torch
from modules_testing import (
    dense_block_diagonal,
    perturb_parameters_,
    relative_error,
    segment_positions,
)

from samu_modules import RGLRU, SAMU, BlockDiagonalLinear

B, L, R, HEADS = 2, 13, 48, 16
TOLERANCE = 2e-5


def recurrence_loop(
    log_a: torch.Tensor,
    gated_u: torch.Tensor,
    segment_pos: torch.Tensor,
    h0: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """h_t = a_t h_{t-1} + sqrt(1 - a_t^2) gated_u_t; at a document start a = 0, multiplier 1."""
    states = []
    h = h0
    for t in range(log_a.shape[1]):
        start = (segment_pos[:, t] == 0)[:, None]
        a = torch.where(start, torch.zeros_like(h), torch.exp(log_a[:, t]))
        multiplier = torch.where(start, torch.ones_like(h), torch.sqrt(1 - a**2))
        h = a * h + multiplier * gated_u[:, t]
        states.append(h)
    return torch.stack(states, dim=1), h


def rglru_oracle(
    mixer: RGLRU, u: torch.Tensor, y: torch.Tensor, segment_pos: torch.Tensor, h0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    def block_diagonal(layer: BlockDiagonalLinear, x: torch.Tensor) -> torch.Tensor:
        return x @ dense_block_diagonal(layer.w) + layer.b.double().flatten()

    gate_x = torch.sigmoid(block_diagonal(mixer.input_gate, u))
    gate_a = torch.sigmoid(block_diagonal(mixer.a_gate, u))
    log_a = -8.0 * gate_a * torch.nn.functional.softplus(mixer.a_param.double())
    states, last = recurrence_loop(log_a, gate_x * u, segment_pos, h0)
    return y * states, last


def samu_oracle(
    mixer: SAMU, u: torch.Tensor, y: torch.Tensor, segment_pos: torch.Tensor, h0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    p = {name: parameter.double() for name, parameter in mixer.named_parameters()}
    retain = torch.sigmoid(p["gate_a_weight"] * u + p["gate_a_bias"])
    input_gate = torch.sigmoid(p["gate_x_weight"] * u + p["gate_x_bias"])
    log_a = -torch.exp(p["log_c"]) * torch.nn.functional.softplus(p["a_param"]) * retain
    states, last = recurrence_loop(log_a, input_gate * u, segment_pos, h0)
    return y * (states + p["skip"] * u), last


def make_mixer(architecture: str, controller: str) -> RGLRU | SAMU:
    """A mixer on the reference backend with every parameter randomised."""
    torch.manual_seed(0)
    mixer = (
        RGLRU(R, HEADS, "reference")
        if architecture == "rglru"
        else SAMU(R, "reference", controller)
    )
    perturb_parameters_(mixer, torch.Generator().manual_seed(1), scale=0.3)
    return mixer


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_mixer_matches_spec_loop(architecture: str) -> None:
    """Outputs, final state and gradients of every input and parameter."""
    mixer = make_mixer(architecture, controller="reference")
    torch.manual_seed(2)
    u = torch.randn(B, L, R, requires_grad=True)
    y = torch.randn(B, L, R, requires_grad=True)
    h0 = torch.randn(B, R, requires_grad=True)
    segment_pos = segment_positions(L, [[3, 4, 11], [1]])
    segment_pos[1] += 5  # row 1 continues a document from h0 until its reset at t=1

    output, last = mixer(u, y, segment_pos, h0)
    oracle = rglru_oracle if architecture == "rglru" else samu_oracle
    u64, y64, h64 = (t.detach().double().requires_grad_() for t in (u, y, h0))
    expected, expected_last = oracle(mixer, u64, y64, segment_pos, h64)  # type: ignore[arg-type]
    assert (output.dtype, last.dtype) == (torch.float32, torch.float32)
    assert relative_error(output, expected) < TOLERANCE
    assert relative_error(last, expected_last) < TOLERANCE

    parameters = list(mixer.parameters())
    grad_output, grad_last = torch.randn_like(output), torch.randn_like(last)
    grads = torch.autograd.grad((output, last), [u, y, h0, *parameters], (grad_output, grad_last))
    expected_grads = torch.autograd.grad(
        (expected, expected_last),
        [u64, y64, h64, *parameters],
        (grad_output.double(), grad_last.double()),
    )
    names = ["u", "y", "h0", *(name for name, _ in mixer.named_parameters())]
    for name, grad, expected_grad in zip(names, grads, expected_grads, strict=True):
        assert relative_error(grad, expected_grad) < TOLERANCE, name


def test_samu_initialisation() -> None:
    torch.manual_seed(3)
    mixer = SAMU(4096, "reference", "reference")
    assert mixer.log_c.item() == pytest.approx(math.log(8.0))
    for name in ("gate_a_bias", "gate_x_bias", "skip"):
        assert getattr(mixer, name).item() == 0.0
    for name in ("gate_a_weight", "gate_x_weight"):
        assert getattr(mixer, name).std().item() == pytest.approx(1.0, rel=0.05)
    radius = torch.exp(-torch.nn.functional.softplus(mixer.a_param))
    assert radius.min().item() >= 0.9
    assert radius.max().item() <= 0.999 + 1e-6
    assert sum(p.numel() for p in mixer.parameters()) == 3 * 4096 + 4
