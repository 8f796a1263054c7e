"""Channels-first scans ([B, R, L] sequences, ``channels_first=True``) against the float64
reference on [B, L, R]: forward output, final state and every gradient, on odd shapes (L
not a multiple of the time tile, R not a multiple of the channels per program) with resets
and an initial state, NaN-poisoned buffers. On CPU under TRITON_INTERPRET=1."""

from __future__ import annotations

import pytest
import torch
from kernel_cases import assert_matches_reference, make_problem, run

import samu_kernels
from samu_kernels.common import launch
from samu_kernels.common.channels_first import TIME_TILE_ENV, TimeTile, time_tile

SHAPE = (2, 37, 19)
WIDE = (1, 50, 70)

CASES = [
    # (architecture, backend, controller, shape, resets, h0, SAMU_KERNELS_TIME_TILE)
    ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", SHAPE, True, True,
     "steps=16,warps=1"),
    # Four channels per program over 70 (the last program's two lanes masked), two tiles.
    ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", WIDE, True, False,
     "channels=4,steps=32,warps=2"),
    # The output h (no fused_output), one tile of the default's 64 steps.
    ("samu", "chunk16", "fp32_fused_coords", SHAPE, False, True, ""),
    # PyTorch's gates, the kernel's y*(h + skip*u) (precomputed gates, skip's gradient alone).
    ("samu", "fused_output_chunk16", "reference", SHAPE, True, True,
     "channels=2,steps=16,warps=1"),
    ("samu", "reference", "fp32_fused_coords", SHAPE, True, True, ""),
    ("rglru", samu_kernels.DEFAULT_BACKENDS["rglru"], None, SHAPE, True, True,
     "steps=16,warps=1"),
    ("rglru", "fused_fused_output_shared_sfu_chunk8", None, WIDE, True, True,
     "channels=2,steps=16,warps=1"),
    # PyTorch's gates, the kernel's y*h.
    ("rglru", "fused_output_chunk16", None, SHAPE, True, False, "steps=32,warps=1"),
    ("rglru", "reference", None, SHAPE, True, True, ""),
]  # fmt: skip


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller", "shape", "resets", "h0", "tile"), CASES
)
def test_channels_first_matches_reference_float32(
    architecture: str,
    backend: str,
    controller: str | None,
    shape: tuple[int, int, int],
    resets: bool,
    h0: bool,
    tile: str,
    device: torch.device,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TIME_TILE_ENV, tile)
    problem = make_problem(architecture, shape, torch.float32, device, resets=resets, h0=h0)
    assert_matches_reference(problem, backend, controller, channels_first=True)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_channels_first_default_backend_bfloat16(
    architecture: str, device: torch.device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIME_TILE_ENV, "steps=16,warps=1")
    problem = make_problem(architecture, SHAPE, torch.bfloat16, device, resets=True, h0=True)
    backend = samu_kernels.DEFAULT_BACKENDS[architecture]
    controller = "fp32_fused_coords" if architecture == "samu" else None
    assert_matches_reference(problem, backend, controller, channels_first=True)


def test_channels_first_reruns_are_bit_identical(
    device: torch.device, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIME_TILE_ENV, "channels=2,steps=16,warps=1")
    problem = make_problem("samu", SHAPE, torch.float32, device, resets=True, h0=True)
    backend = samu_kernels.DEFAULT_BACKENDS["samu"]
    first = run(problem, backend, channels_first=True)
    second = run(problem, backend, channels_first=True)
    assert all(torch.equal(first[name], second[name]) for name in first)


def test_channels_first_launches_the_channels_first_kernels(
    device: torch.device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Triton backend with ``channels_first`` never reaches the [B, L, R] launchers."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a [B, L, R] launcher ran for channels-first sequences")

    monkeypatch.setattr(launch, "launch_forward", refuse)
    monkeypatch.setattr(launch, "launch_backward", refuse)
    problem = make_problem("samu", (1, 20, 5), torch.float32, device, resets=False, h0=False)
    run(problem, samu_kernels.DEFAULT_BACKENDS["samu"], channels_first=True)


def test_channels_first_shapes_are_checked_in_their_own_layout(device: torch.device) -> None:
    u = torch.randn(2, 5, 20, device=device)  # [B, R, L]: R = 5, L = 20
    params = [torch.randn(5, device=device) for _ in range(3)]
    scalars = [torch.tensor(0.5, device=device) for _ in range(4)]
    a_param, w_a, w_x = params
    b_a, b_x, log_c, skip = scalars
    with pytest.raises(ValueError, match=r"h0 must have shape \[B, R\] = \[2, 5\]"):
        samu_kernels.samu_scan(
            u, u, a_param, w_a, b_a, w_x, b_x, log_c, skip,
            h0=torch.zeros(2, 20, device=device), channels_first=True,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"segment_pos must have shape \[B, L\] = \[2, 20\]"):
        samu_kernels.samu_scan(
            u, u, a_param, w_a, b_a, w_x, b_x, log_c, skip,
            segment_pos=torch.zeros(2, 5, dtype=torch.int64, device=device), channels_first=True,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"u must have shape \[B, R, L\]"):
        samu_kernels.rglru_scan(u[0], u[0], u[0], a_param, channels_first=True)


def test_time_tile_default_and_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_TILE_ENV, raising=False)
    assert time_tile(8192) == TimeTile(channels=1, steps=256, warps=1)
    assert time_tile(37) == TimeTile(channels=1, steps=64, warps=1)
    monkeypatch.setenv(TIME_TILE_ENV, "steps=2048,warps=8")
    assert time_tile(8192) == TimeTile(channels=1, steps=2048, warps=8)
    for bad in ("steps=1000", "lanes=2", "warps=0", "steps"):
        monkeypatch.setenv(TIME_TILE_ENV, bad)
        with pytest.raises(ValueError, match=TIME_TILE_ENV):
            time_tile(8192)
