"""recurrentgemma's own block as a peer row: built at a case's sizes, one protocol step."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import samu_kernels
from samu_bench import CaseSpec, ResidentRow, Row
from samu_bench.peers import (
    RecurrentGemmaBlock,
    accelerated_linear_scan,
    build_recurrentgemma_block,
)
from samu_modules import BlockConfig, from_recurrentgemma

pytest.importorskip("recurrentgemma.torch", reason="recurrentgemma[torch] is not installed")


@pytest.fixture
def odd_case() -> CaseSpec:
    """L = 7 (no chunk multiple), D = 24 (no power of two), R = 32 (two RG-LRU heads' width)."""
    return CaseSpec(name="tiny_peer", batch=2, length=7, width=24, rnn_width=32, depth=3)


def peer_row() -> Row:
    return Row("rglru", "peer:recurrentgemma", None, build_module=build_recurrentgemma_block)


def test_block_has_the_rglru_parameter_count(odd_case: CaseSpec) -> None:
    block = build_recurrentgemma_block(odd_case, peer_row(), torch.device("cpu"))
    config = BlockConfig(width=24, rnn_width=32, depth=3, architecture="rglru", backend="reference")
    assert sum(parameter.numel() for parameter in block.parameters()) == config.parameter_count


def test_block_computes_what_samu_modules_computes(odd_case: CaseSpec) -> None:
    """Same weights, same function: the peer row times the identical block."""
    torch.manual_seed(0)
    peer = RecurrentGemmaBlock(odd_case.width, odd_case.rnn_width, odd_case.depth)
    ours = from_recurrentgemma(peer.block, backend="reference")
    x = torch.randn(odd_case.input_shape, dtype=torch.float64).float()
    with torch.no_grad():
        expected = ours(x)
        output = peer(x)
    assert output.shape == x.shape
    assert float((output - expected).norm() / expected.norm()) < 1e-5


def test_one_protocol_step_on_cpu(odd_case: CaseSpec) -> None:
    built: list[nn.Module] = []

    def build_and_keep(case: CaseSpec, row: Row, device: torch.device) -> nn.Module:
        built.append(build_recurrentgemma_block(case, row, device))
        return built[-1]

    row = Row("rglru", "peer:recurrentgemma", None, build_module=build_and_keep)
    resident = ResidentRow(odd_case, row, torch.device("cpu"), seed=0)
    parameters = list(built[0].parameters())
    before = [p.detach().clone() for p in parameters]
    resident.step()
    assert resident.parameters == sum(p.numel() for p in parameters)
    assert all(torch.isfinite(p).all() for p in parameters)
    assert any(not torch.equal(a, b) for a, b in zip(before, parameters, strict=True))


@pytest.mark.parametrize(
    ("sizes", "message"),
    [((0, 32, 1), "width must be a positive int"), ((24, 30, 1), "rnn_width must be a multiple")],
)
def test_block_refuses_bad_sizes(sizes: tuple[int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecurrentGemmaBlock(*sizes)


def test_forward_refuses_a_wrong_rank() -> None:
    block = RecurrentGemmaBlock(24, 32, 1)
    with pytest.raises(ValueError, match=r"x must be \[B, L, D\]"):
        block(torch.randn(7, 24))


def test_scan_peer_block_equals_recurrentgemma(odd_case: CaseSpec) -> None:
    """samu-modules' block with a registered scan peer computes recurrentgemma's block."""
    samu_kernels.register_linear_scan(
        "peer:test_accelerated_loop", accelerated_linear_scan(gate_loop)
    )
    torch.manual_seed(1)
    peer = RecurrentGemmaBlock(odd_case.width, odd_case.rnn_width, odd_case.depth)
    ours = from_recurrentgemma(peer.block, backend="peer:test_accelerated_loop")
    x = torch.randn(odd_case.input_shape)
    with torch.no_grad():
        expected = peer(x)
        output = ours(x)
    assert float((output - expected).norm() / expected.norm()) < 1e-5


def gate_loop(gates: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """accelerated-scan's recurrence on [B, C, T] by a loop over T."""
    state = torch.zeros_like(tokens[..., 0])
    states = []
    for step in range(tokens.shape[-1]):
        state = gates[..., step] * state + tokens[..., step]
        states.append(state)
    return torch.stack(states, dim=-1)
