"""Chunked scans (forward and backward) for the RG-LRU and SAMU recurrences.

Public API: :func:`rglru_scan`, :func:`samu_scan` (returning :class:`ScanOutput`), the
backend-name grammar (:func:`parse_backend`, :func:`check_backend`, :class:`BackendSpec`,
:class:`BackendNameError`, :data:`DEFAULT_BACKENDS`, :data:`VALID_TOKENS`,
:data:`REFERENCE_FILE_ROWS`), the SAMU controllers (:data:`CONTROLLERS`,
:data:`DEFAULT_CONTROLLER`) and :func:`register_linear_scan` for benchmark peers.
"""

from samu_kernels.backends import (
    DEFAULT_BACKENDS,
    REFERENCE_FILE_ROWS,
    VALID_TOKENS,
    BackendNameError,
    BackendSpec,
    check_backend,
    parse_backend,
)
from samu_kernels.common.chunk import FAST_MATH, TANH_SIGMOID
from samu_kernels.controllers import CONTROLLERS, DEFAULT_CONTROLLER
from samu_kernels.peers import register_linear_scan
from samu_kernels.rglru import rglru_scan
from samu_kernels.samu import samu_scan
from samu_kernels.scan_output import ScanOutput

FAST_MATH_ENABLED: bool = bool(FAST_MATH)
"""Whether the compiled kernels use flush-to-zero transcendentals (the default;
`SAMU_KERNELS_FAST_MATH=0` at import turns them off; never under the interpreter)."""
TANH_SIGMOID_ENABLED: bool = TANH_SIGMOID
"""Whether the time-split kernels of ``shared_sfu`` names take 16-bit inputs' gate sigmoids
from ``tanh.approx`` (the default under fast math; `SAMU_KERNELS_TANH_SIGMOID=0` at import
turns it off)."""

__all__ = [
    "CONTROLLERS",
    "DEFAULT_BACKENDS",
    "DEFAULT_CONTROLLER",
    "FAST_MATH_ENABLED",
    "REFERENCE_FILE_ROWS",
    "TANH_SIGMOID_ENABLED",
    "VALID_TOKENS",
    "BackendNameError",
    "BackendSpec",
    "ScanOutput",
    "check_backend",
    "parse_backend",
    "register_linear_scan",
    "rglru_scan",
    "samu_scan",
]
