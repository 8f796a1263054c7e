"""The flush-to-zero switch `SAMU_KERNELS_FAST_MATH`: read at import, on by default in
compiled kernels, off under the interpreter, and a bad value refused by name."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import samu_kernels
from samu_kernels.common.chunk import FAST_MATH_ENV

PROBE = "import samu_kernels; print(samu_kernels.FAST_MATH_ENABLED)"


def _import_in_fresh_process(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in (FAST_MATH_ENV, "TRITON_INTERPRET")
    }
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="interpreter runs only")
def test_the_interpreter_never_uses_fast_math() -> None:
    assert samu_kernels.FAST_MATH_ENABLED is False


@pytest.mark.parametrize(("env", "expected"), [({}, "True"), ({FAST_MATH_ENV: "0"}, "False")])
def test_compiled_kernels_use_fast_math_unless_turned_off(
    env: dict[str, str], expected: str
) -> None:
    result = _import_in_fresh_process(**env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == expected


def test_a_bad_switch_value_is_refused_by_name() -> None:
    result = _import_in_fresh_process(**{FAST_MATH_ENV: "yes"})
    assert result.returncode != 0
    assert f"{FAST_MATH_ENV} must be 0 or 1" in result.stderr
