"""flash-linear-attention's HGRN scans (`fla-core`) as samu-kernels linear scans.

`fla.ops.hgrn.chunk_hgrn(x, g, initial_state=None, output_final_state=False)` and
`fused_recurrent_hgrn(...)` (same leading arguments) compute h_t = exp(g_t) h_{t-1} + x_t
on [B, T, D] tensors and return `(o, final_state)`, o in x's dtype with an fp32 carry.
That is samu's recurrence with g = log_a, so the adapters pass the gates through
unchanged: x stays in the compute dtype, log_a in float32 (-inf at a document start
gives decay 0 in both kernels, forward and backward).

Initial state: `fused_recurrent_hgrn` takes it natively, with its gradient;
`chunk_hgrn` (fla-core 0.6.0) returns no gradient for `initial_state`, so its adapter
folds h0 into the first input instead (:func:`fold_initial_state`). The final state is
the last output (differentiable; fla's own `final_state` of `chunk_hgrn` gets no
gradient). Both fla functions are `torch.compiler.disable`d by fla itself: under
`torch.compile` the scan is a graph break and runs fla's kernels eagerly.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch

from samu_bench.peers.scan_inputs import (
    check_linear_scan_inputs,
    fold_initial_state,
    last_state,
)
from samu_kernels.peers import LinearScanFn

__all__ = [
    "HgrnFn",
    "chunk_hgrn_linear_scan",
    "fused_recurrent_hgrn_linear_scan",
    "load_fla_hgrn",
]

HgrnFn = Callable[..., tuple[torch.Tensor, "torch.Tensor | None"]]
"""fla's `chunk_hgrn` / `fused_recurrent_hgrn`: (x, g, initial_state, output_final_state)."""


def load_fla_hgrn() -> tuple[HgrnFn, HgrnFn]:
    """Import fla-core: `(chunk_hgrn, fused_recurrent_hgrn)` from `fla.ops.hgrn`.

    Raises:
        ImportError: fla-core is not installed (or fails to import).
    """
    hgrn = importlib.import_module("fla.ops.hgrn")
    return hgrn.chunk_hgrn, hgrn.fused_recurrent_hgrn


def chunk_hgrn_linear_scan(chunk_hgrn: HgrnFn) -> LinearScanFn:
    """A samu-kernels linear scan that runs fla's `chunk_hgrn`.

    The returned function maps (log_a fp32 [B, L, R], x [B, L, R], h0 fp32 [B, R] | None)
    to (h [B, L, R] in x's dtype — float32 when h0 is given —, h_last fp32 [B, R]).
    """

    def scan(
        log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_linear_scan_inputs(log_a, x, h0)
        states, _ = chunk_hgrn(fold_initial_state(log_a, x, h0), log_a, None, False)
        return states, last_state(states)

    return scan


def fused_recurrent_hgrn_linear_scan(fused_recurrent_hgrn: HgrnFn) -> LinearScanFn:
    """A samu-kernels linear scan that runs fla's `fused_recurrent_hgrn`.

    The returned function maps (log_a fp32 [B, L, R], x [B, L, R], h0 fp32 [B, R] | None)
    to (h [B, L, R] in x's dtype, h_last fp32 [B, R]); h0 goes to fla as `initial_state`.
    """

    def scan(
        log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_linear_scan_inputs(log_a, x, h0)
        states, _ = fused_recurrent_hgrn(x, log_a, h0, False)
        return states, last_state(states)

    return scan
