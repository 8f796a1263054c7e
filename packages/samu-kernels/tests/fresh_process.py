"""Python code run in a fresh interpreter with the compiled kernels' defaults: the switches
read at import (``TRITON_INTERPRET``, ``SAMU_KERNELS_FAST_MATH``,
``SAMU_KERNELS_TANH_SIGMOID``) left unset unless given."""

from __future__ import annotations

import os
import subprocess
import sys

from samu_kernels.common.chunk import FAST_MATH_ENV, TANH_SIGMOID_ENV


def python_in_fresh_process(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``python -c`` under this environment less the import-time switches,
    plus ``env``; stdout and stderr captured as text, the exit status not checked."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in (FAST_MATH_ENV, TANH_SIGMOID_ENV, "TRITON_INTERPRET")
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=False,
    )
