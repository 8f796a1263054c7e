"""The flush-to-zero switch `SAMU_KERNELS_FAST_MATH` and the tanh sigmoids under it
(`SAMU_KERNELS_TANH_SIGMOID`): read at import, on by default in compiled kernels, off under
the interpreter, a bad value refused by name; the tanh form only for 16-bit inputs."""

from __future__ import annotations

import os

import pytest
import torch
from fresh_process import python_in_fresh_process

import samu_kernels
from samu_kernels.backends import parse_backend
from samu_kernels.common import launch
from samu_kernels.common.chunk import FAST_MATH_ENV, SFU_TANH_SIGMOIDS, TANH_SIGMOID_ENV

PROBE = "import samu_kernels; print(samu_kernels.FAST_MATH_ENABLED)"
TANH_PROBE = "from samu_kernels.common.chunk import TANH_SIGMOID; print(TANH_SIGMOID)"


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="interpreter runs only")
def test_the_interpreter_never_uses_fast_math() -> None:
    assert samu_kernels.FAST_MATH_ENABLED is False


@pytest.mark.parametrize(("env", "expected"), [({}, "True"), ({FAST_MATH_ENV: "0"}, "False")])
def test_compiled_kernels_use_fast_math_unless_turned_off(
    env: dict[str, str], expected: str
) -> None:
    result = python_in_fresh_process(PROBE, **env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == expected


def test_a_bad_switch_value_is_refused_by_name() -> None:
    result = python_in_fresh_process(PROBE, **{FAST_MATH_ENV: "yes"})
    assert result.returncode != 0
    assert f"{FAST_MATH_ENV} must be 0 or 1" in result.stderr


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, "True"), ({TANH_SIGMOID_ENV: "0"}, "False"), ({FAST_MATH_ENV: "0"}, "False")],
)
def test_tanh_sigmoids_follow_fast_math_unless_turned_off(
    env: dict[str, str], expected: str
) -> None:
    result = python_in_fresh_process(TANH_PROBE, **env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == expected


def test_a_bad_tanh_switch_value_is_refused_by_name() -> None:
    result = python_in_fresh_process(TANH_PROBE, **{TANH_SIGMOID_ENV: "2"})
    assert result.returncode != 0
    assert f"{TANH_SIGMOID_ENV} must be 0 or 1" in result.stderr


@pytest.mark.parametrize(
    ("backend", "dtype", "expected"),
    [
        ("fused_output_fused_write_shared_sfu_chunk32", torch.bfloat16, SFU_TANH_SIGMOIDS),
        ("fused_output_fused_write_shared_sfu_chunk32", torch.float16, SFU_TANH_SIGMOIDS),
        ("fused_output_fused_write_shared_sfu_chunk32", torch.float32, 1),
        ("fused_output_fused_write_chunk32", torch.bfloat16, 0),
    ],
)
def test_only_16_bit_inputs_of_shared_sfu_names_get_tanh_sigmoids(
    backend: str, dtype: torch.dtype, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "TANH_SIGMOID", True)
    config = launch.scan_config(
        parse_backend(backend), launch.GateMode.SAMU, launch.OutMode.Y_H_SKIP
    )
    u = torch.empty(1, 64, 32, dtype=dtype)
    flags = launch._Geometry.of(u, config).split_flags(
        config, has_resets=False, dtype=dtype, forward_warps=True
    )
    assert flags["SHARED_SFU"] == expected
    # torch.compile writes a launch's constants into Python source: plain values only (a
    # tl.constexpr became `constexpr[2]` there, a NameError).
    assert all(type(value) in (int, bool) for value in flags.values())
