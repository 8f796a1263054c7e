"""Registry of external linear scans ("peer:<id>" backends) for benchmarks."""

from __future__ import annotations

from collections.abc import Callable

import torch

from samu_kernels.backends import BackendSpec, parse_backend
from samu_kernels.common.reference import accumulation_dtype, linear_scan_reference

__all__ = [
    "LinearScanFn",
    "get_linear_scan",
    "linear_scan_of",
    "register_linear_scan",
    "registered_peers",
]

LinearScanFn = Callable[
    [torch.Tensor, torch.Tensor, "torch.Tensor | None"], tuple[torch.Tensor, torch.Tensor]
]
"""fn(log_a fp32 [B, L, R], x [B, L, R], h0 fp32 [B, R] | None)
-> (h [B, L, R], h_last fp32 [B, R]).

Computes h_t = exp(log_a_t) * h_{t-1} + x_t with autograd. ``log_a`` is -inf where a
document starts (decay 0)."""

_PEERS: dict[str, LinearScanFn] = {}


def register_linear_scan(name: str, fn: LinearScanFn) -> None:
    """Register ``fn`` as the backend ``name`` (which must look like "peer:<id>").

    A peer backend computes the gates in PyTorch (as the reference does) and calls ``fn``
    for the recurrence; it works for both architectures. Registering a name again
    replaces the earlier function.

    Raises:
        ValueError: ``name`` is not of the form "peer:<id>".
        TypeError: ``fn`` is not callable.
    """
    spec = parse_backend(name) if isinstance(name, str) and name.startswith("peer:") else None
    if spec is None or spec.external is None:
        raise ValueError(f"name must look like 'peer:<id>', got {name!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    _PEERS[name] = fn


def get_linear_scan(name: str) -> LinearScanFn:
    """The function registered as ``name``.

    Raises:
        ValueError: nothing is registered under ``name``.
    """
    try:
        return _PEERS[name]
    except KeyError:
        raise ValueError(
            f"backend {name!r} is not registered; registered peers: {sorted(_PEERS)} "
            "(use samu_kernels.register_linear_scan)"
        ) from None


def registered_peers() -> tuple[str, ...]:
    """Names of the registered peer backends."""
    return tuple(sorted(_PEERS))


def linear_scan_of(spec: BackendSpec, dtype: torch.dtype) -> tuple[LinearScanFn, torch.dtype]:
    """The recurrence of a backend whose gates PyTorch computes, and the dtype of its x input.

    A "peer:<id>" backend runs the registered scan on x in the compute dtype ``dtype``; the
    reference runs its own scan in the accumulation dtype (float32, float64 for float64).
    """
    if spec.external is not None:
        return get_linear_scan(spec.external), dtype
    return linear_scan_reference, accumulation_dtype(dtype)
