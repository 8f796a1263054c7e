"""The reference backend against an independent float64 autograd loop; peers; arg checks."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from kernel_cases import make_problem, relative_error, run
from torch.nn.functional import softplus

import samu_kernels


class _ClippedSqrt(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, z: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(z)
        return z.sqrt()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (z,) = ctx.saved_tensors
        return grad / torch.clip(4.0 * z, min=1e-6).sqrt()


def _loop(
    log_a: torch.Tensor, gated: torch.Tensor, reset: torch.Tensor, h0: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """recurrentgemma's formulation, written out: multiplier 1 and decay 0 at resets."""
    a = torch.exp(log_a)
    multiplier = _ClippedSqrt.apply(1 - torch.exp(2 * log_a))
    multiplier = reset[..., None] + ~reset[..., None] * multiplier
    x = gated * multiplier
    a = a * ~reset[..., None]
    h = torch.zeros_like(x[:, 0]) if h0 is None else h0
    states = []
    for t in range(x.shape[1]):
        h = a[:, t] * h + x[:, t]
        states.append(h)
    return torch.stack(states, dim=1), h


def _independent(
    problem_tensors: dict[str, torch.Tensor | None],
    architecture: str,
    segment_pos: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    p = {k: v for k, v in problem_tensors.items() if v is not None}
    u = p["u"]
    reset = torch.zeros(u.shape[:2], dtype=torch.bool) if segment_pos is None else segment_pos == 0
    if architecture == "rglru":
        log_a = -8.0 * torch.sigmoid(p["gate_a_logits"]) * softplus(p["a_param"])
        states, last = _loop(log_a, u * torch.sigmoid(p["gate_x_logits"]), reset, p.get("h0"))
        return p["y"] * states, last
    retain = torch.sigmoid(p["gate_a_weight"] * u + p["gate_a_bias"])
    log_a = -torch.exp(p["log_c"]) * softplus(p["a_param"]) * retain
    gate = torch.sigmoid(p["gate_x_weight"] * u + p["gate_x_bias"])
    states, last = _loop(log_a, u * gate, reset, p.get("h0"))
    return p["y"] * (states + p["skip"] * u), last


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
@pytest.mark.parametrize(("resets", "h0"), [(True, True), (False, True), (True, False)])
def test_reference_matches_an_independent_float64_loop(
    architecture: str, resets: bool, h0: bool
) -> None:
    problem = make_problem(
        architecture, (2, 11, 5), torch.float64, torch.device("cpu"), resets=resets, h0=h0, seed=3
    )
    got = run(problem, "reference")
    leaves = {
        k: None if v is None else v.clone().requires_grad_(True) for k, v in problem.tensors.items()
    }
    output, last = _independent(leaves, architecture, problem.segment_pos)
    torch.autograd.backward(
        (output * problem.grad_output).sum() + (last * problem.grad_final).sum()
    )
    assert relative_error(got["output"], output) < 1e-12
    assert relative_error(got["final_state"], last) < 1e-12
    for name, leaf in leaves.items():
        if leaf is not None:
            assert leaf.grad is not None
            assert relative_error(got[f"grad_{name}"], leaf.grad) < 1e-12, name


def test_reference_keeps_bfloat16_output_and_float32_state() -> None:
    problem = make_problem(
        "samu", (1, 5, 3), torch.bfloat16, torch.device("cpu"), resets=False, h0=False
    )
    got = run(problem, "reference")
    assert got["output"].dtype == torch.bfloat16
    assert got["final_state"].dtype == torch.float32


def _torch_loop_peer(
    log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.zeros_like(x[:, 0], dtype=torch.float32) if h0 is None else h0
    states = []
    for t in range(x.shape[1]):
        h = torch.exp(log_a[:, t]) * h + x[:, t].float()
        states.append(h)
    return torch.stack(states, dim=1).to(x.dtype), h


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_registered_peer_matches_the_reference(architecture: str) -> None:
    samu_kernels.register_linear_scan("peer:test", _torch_loop_peer)
    problem = make_problem(
        architecture, (2, 9, 4), torch.float32, torch.device("cpu"), resets=True, h0=True
    )
    got = run(problem, "peer:test")
    expected = run(problem, "reference", float64=True)
    for name, value in expected.items():
        assert relative_error(got[name], value) < 1e-5, name


def test_peer_registration_errors() -> None:
    with pytest.raises(ValueError, match="peer:<id>"):
        samu_kernels.register_linear_scan("test", _torch_loop_peer)
    with pytest.raises(TypeError, match="callable"):
        samu_kernels.register_linear_scan("peer:x", 3)  # type: ignore[arg-type]
    problem = make_problem(
        "rglru", (1, 3, 2), torch.float32, torch.device("cpu"), resets=False, h0=False
    )
    with pytest.raises(ValueError, match="not registered"):
        run(problem, "peer:never_registered")


def _rglru_args(**overrides: Any) -> dict[str, Any]:
    u = torch.randn(2, 5, 3)
    args: dict[str, Any] = {
        "u": u,
        "gate_x_logits": torch.randn_like(u),
        "gate_a_logits": torch.randn_like(u),
        "a_param": torch.randn(3),
    }
    args.update(overrides)
    return args


@pytest.mark.parametrize(
    ("overrides", "error", "argument"),
    [
        ({"u": torch.randn(5, 3)}, ValueError, "u must have shape"),
        ({"u": torch.randn(2, 5, 3).half()}, TypeError, "u must have dtype"),
        ({"gate_x_logits": torch.randn(2, 5, 4)}, ValueError, "gate_x_logits"),
        ({"gate_a_logits": torch.randn(2, 5, 3).double()}, TypeError, "gate_a_logits"),
        ({"a_param": torch.randn(4)}, ValueError, "a_param"),
        ({"a_param": torch.randn(3).double()}, TypeError, "a_param"),
        ({"y": torch.randn(2, 4, 3)}, ValueError, "y must have"),
        ({"segment_pos": torch.zeros(2, 4, dtype=torch.long)}, ValueError, "segment_pos"),
        ({"segment_pos": torch.zeros(2, 5)}, TypeError, "segment_pos"),
        ({"h0": torch.zeros(2, 4)}, ValueError, "h0"),
        ({"h0": torch.zeros(2, 3, dtype=torch.bfloat16)}, TypeError, "h0"),
        ({"u": [1.0]}, TypeError, "u must be a torch.Tensor"),
        ({"backend": "chunk7"}, ValueError, "Valid tokens"),
    ],
)
def test_rglru_scan_rejects_bad_arguments(
    overrides: dict[str, Any], error: type[Exception], argument: str
) -> None:
    with pytest.raises(error, match=argument):
        samu_kernels.rglru_scan(**_rglru_args(**overrides))


def test_float64_is_reference_only() -> None:
    args = _rglru_args(**{k: v.double() for k, v in _rglru_args().items()})
    assert samu_kernels.rglru_scan(**args, backend="reference").final_state.dtype == torch.float64
    with pytest.raises(TypeError, match="u must have dtype"):
        samu_kernels.rglru_scan(**args, backend="chunk16")


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("log_c", torch.zeros(1), ValueError),
        ("skip", torch.zeros((), dtype=torch.float64), TypeError),
        ("gate_a_weight", torch.zeros(2), ValueError),
    ],
)
def test_samu_scan_rejects_bad_parameters(
    name: str, value: torch.Tensor, error: type[Exception]
) -> None:
    u = torch.randn(1, 4, 3)
    args: dict[str, Any] = {
        "u": u,
        "y": torch.randn_like(u),
        "a_param": torch.zeros(3),
        "gate_a_weight": torch.zeros(3),
        "gate_a_bias": torch.zeros(()),
        "gate_x_weight": torch.zeros(3),
        "gate_x_bias": torch.zeros(()),
        "log_c": torch.zeros(()),
        "skip": torch.zeros(()),
    }
    args[name] = value
    with pytest.raises(error, match=name):
        samu_kernels.samu_scan(**args)
    with pytest.raises(ValueError, match="controller"):
        samu_kernels.samu_scan(
            **{**args, name: args["log_c"] if name != "log_c" else torch.zeros(())},
            controller="nope",
        )
