"""Random scan problems and their evaluation against the float64 reference backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

import samu_kernels
from samu_kernels.common import launch
from samu_kernels.common.geometry import TILE_ENV, TMA_STAGES
from samu_kernels.common.reference import swap_layout

TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2}
"""Largest relative error ||out - ref|| / ||ref|| accepted per input dtype."""


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """||value - reference|| / ||reference|| in float64 (0 when both are zero)."""
    difference = (value.double() - reference.double()).norm().item()
    scale = reference.double().norm().item()
    return float(difference / scale if scale > 0 else difference)


@dataclass
class Problem:
    """Inputs of one scan call: ``tensors`` are differentiable, ``segment_pos`` is not."""

    architecture: str
    tensors: dict[str, torch.Tensor | None]
    segment_pos: torch.Tensor | None
    grad_output: torch.Tensor
    grad_final: torch.Tensor


def make_problem(
    architecture: str,
    shape: tuple[int, int, int],
    dtype: torch.dtype,
    device: torch.device,
    *,
    resets: bool,
    h0: bool,
    seed: int = 0,
) -> Problem:
    """Fresh random inputs; with ``resets`` documents start at t=0 of row 0 and mid-row in
    every row (row 1 continues a document at t=0, so h0 matters there)."""
    gen = torch.Generator().manual_seed(seed)
    batch, length, width = shape

    param_dtype = torch.float64 if dtype == torch.float64 else torch.float32

    def randn(*size: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*size, generator=gen, dtype=torch.float64) * scale).to(
            device, param_dtype
        )

    def seq() -> torch.Tensor:
        return randn(batch, length, width).to(dtype)

    tensors: dict[str, torch.Tensor | None]
    # a_param near recurrentgemma's ring init (decays 0.9..0.999) and a wider spread.
    a_param = randn(width, scale=1.5) - 4.0
    if architecture == "rglru":
        tensors = {
            "u": seq(),
            "gate_x_logits": seq(),
            "gate_a_logits": seq(),
            "a_param": a_param,
            "y": seq(),
        }
    else:
        tensors = {
            "u": seq(),
            "y": seq(),
            "a_param": a_param,
            "gate_a_weight": randn(width),
            "gate_a_bias": randn(1, scale=0.5)[0],
            "gate_x_weight": randn(width),
            "gate_x_bias": randn(1, scale=0.5)[0],
            "log_c": randn(1, scale=0.3)[0] + 2.0,
            "skip": randn(1)[0],
        }
    tensors["h0"] = randn(batch, width) if h0 else None
    segment_pos = None
    if resets:
        segment_pos = torch.arange(length).repeat(batch, 1) + 3
        segment_pos[0, 0] = 0
        for row in range(batch):
            start = int(torch.randint(1, length, (1,), generator=gen))
            segment_pos[row, start:] = torch.arange(length - start)
        segment_pos = segment_pos.to(device)
    return Problem(
        architecture,
        tensors,
        segment_pos,
        # Representable in the output dtype: autograd hands the kernel the output gradient
        # in that dtype, so rounding it here keeps the fp64 reference on the same inputs.
        seq(),
        randn(batch, width),
    )


SATURATING_INPUTS = {
    "rglru": ("gate_x_logits", "gate_a_logits"),
    "samu": ("gate_a_weight", "gate_x_weight"),
}
"""The inputs :func:`saturate` scales, per architecture."""


def saturate(problem: Problem) -> Problem:
    """``problem`` with its gate logits (RG-LRU) or gate weights (SAMU) times 100: most gate
    logits lie far outside the sigmoid's range (2^-z overflows to inf in fp32 where a
    sigmoid is 0), decays are exactly 1 (1 - a^2 = 0: the clipped sqrt derivative) and gates
    exactly 0 or 1."""
    for name in SATURATING_INPUTS[problem.architecture]:
        tensor = problem.tensors[name]
        assert tensor is not None
        problem.tensors[name] = tensor * 100.0
    return problem


def run(
    problem: Problem,
    backend: str,
    controller: str | None = None,
    *,
    float64: bool = False,
    final_state_in_loss: bool = True,
    channels_first: bool = False,
) -> dict[str, torch.Tensor]:
    """Forward + backward of loss = <output, grad_output> + <final_state, grad_final> (the
    second term left out without ``final_state_in_loss``: no gradient reaches the final
    state); returns the output, the final state and the gradient of every input.
    ``channels_first``: the sequences go in as contiguous [B, R, L] copies; what comes back
    is transposed to [B, L, R], so that it compares with a [B, L, R] run."""

    def layout(tensor: torch.Tensor) -> torch.Tensor:
        return swap_layout(tensor, channels_first and tensor.ndim == 3)

    inputs: dict[str, Any] = {
        name: None
        if tensor is None
        else layout(tensor.double() if float64 else tensor)
        .detach()
        .contiguous()
        .requires_grad_(True)
        for name, tensor in problem.tensors.items()
    }
    h0 = inputs.pop("h0")
    if problem.architecture == "rglru":
        result = samu_kernels.rglru_scan(
            **inputs,
            segment_pos=problem.segment_pos,
            h0=h0,
            backend=backend,
            channels_first=channels_first,
        )
    else:
        result = samu_kernels.samu_scan(
            **inputs,
            segment_pos=problem.segment_pos,
            h0=h0,
            backend=backend,
            controller=controller or samu_kernels.DEFAULT_CONTROLLER,
            channels_first=channels_first,
        )
    output = layout(result.output)
    loss = (output.double() * problem.grad_output.double()).sum()
    if final_state_in_loss:
        loss = loss + (result.final_state.double() * problem.grad_final.double()).sum()
    torch.autograd.backward(loss)
    values = {"output": output.detach(), "final_state": result.final_state.detach()}
    inputs["h0"] = h0
    for name, tensor in inputs.items():
        if tensor is not None:
            assert tensor.grad is not None, f"no gradient for {name}"
            values[f"grad_{name}"] = layout(tensor.grad)
    return values


def assert_matches_reference(
    problem: Problem,
    backend: str,
    controller: str | None = None,
    *,
    channels_first: bool = False,
) -> dict[str, torch.Tensor]:
    """Compare ``backend`` with the float64 reference (on [B, L, R]) on every output and
    gradient; ``channels_first``: ``backend`` runs on [B, R, L] copies (see :func:`run`)."""
    dtype = next(t for t in problem.tensors.values() if t is not None).dtype
    got = run(problem, backend, controller, channels_first=channels_first)
    expected = run(problem, "reference", controller, float64=True)
    errors = {name: relative_error(got[name], expected[name]) for name in expected}
    bad = {name: err for name, err in errors.items() if not err <= TOLERANCE[dtype]}
    assert not bad, f"{backend} ({controller}) exceeds {TOLERANCE[dtype]:.0e}: {bad}"
    return got


def record_tile_loads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A list that gets, for every time-split launch from now on, whether its tiles came
    through tensor descriptors (``launch.tile_sources``)."""
    described: list[bool] = []
    original = launch.tile_sources

    def recording(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        sources, flags = original(*args, **kwargs)
        described.append(flags["DESCRIBED"])
        return sources, flags

    monkeypatch.setattr(launch, "tile_sources", recording)
    return described


def assert_tma_loads_agree(
    problem: Problem,
    backend: str,
    controller: str | None,
    tile: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The time-split kernels of ``backend`` under the geometry ``tile`` (an override, may
    be empty) give the same bits with tiles through the Tensor Memory Accelerator
    (tma=TMA_STAGES) as with pointer loads (tma=0), forward and backward took each path, and
    the first matches the float64 reference."""
    described = record_tile_loads(monkeypatch)
    values = {}
    for stages in (0, TMA_STAGES):
        monkeypatch.setenv(TILE_ENV, ",".join(filter(None, (tile, f"tma={stages}"))))
        described.clear()
        values[stages] = run(problem, backend, controller)
        assert described == [bool(stages)] * 2, f"tma={stages}: descriptors {described}"
    differing = [
        name
        for name, value in values[0].items()
        if not torch.equal(value, values[TMA_STAGES][name])
    ]
    assert not differing, f"{backend}: tma={TMA_STAGES} differs from pointer loads in {differing}"
    assert_matches_reference(problem, backend, controller)
