"""accelerated-scan's Triton scan as a samu-kernels linear scan.

`accelerated_scan.scalar.scan(gates, tokens)` (accelerated-scan >= 0.3) computes
h_t = gates_t h_{t-1} + tokens_t on contiguous [B, C, T] tensors of any length T, with
autograd, and no initial state. The adapter therefore:

- passes gates = exp(log_a) (0 at a document start) and the tokens, both float32 —
  decays close to 1 do not survive rounding to bfloat16, and the kernel's associative
  scan wants one dtype for both —, transposed to [B, R, L] and made contiguous;
- folds an initial state h0 into the first token (:func:`fold_initial_state`);
- returns h transposed back to [B, L, R] (float32) and h_last = h[:, -1].

Under `torch.compile` the scan call is a graph break (`torch.compiler.disable`), as
fla's scans are, so dynamo never traces into the library's autograd function.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

import torch

from samu_bench.peers.scan_inputs import (
    check_linear_scan_inputs,
    fold_initial_state,
    last_state,
)
from samu_kernels.peers import LinearScanFn

__all__ = ["GateScanFn", "accelerated_linear_scan", "load_accelerated_scan"]

GateScanFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""accelerated-scan's `scan(gates [B, C, T], tokens [B, C, T]) -> states [B, C, T]`."""

_graph_break = cast(Callable[[LinearScanFn], LinearScanFn], torch.compiler.disable)
"""`torch.compiler.disable` (untyped in torch): run a function eagerly under torch.compile."""


def load_accelerated_scan() -> GateScanFn:
    """Import accelerated-scan's Triton scan, `accelerated_scan.scalar.scan`.

    Raises:
        ImportError: accelerated-scan (>= 0.3, which has `accelerated_scan.scalar`) is not
            installed or fails to import.
    """
    scan: GateScanFn = importlib.import_module("accelerated_scan.scalar").scan
    return scan


def accelerated_linear_scan(gate_scan: GateScanFn) -> LinearScanFn:
    """A samu-kernels linear scan that runs accelerated-scan's `scan(gates, tokens)`.

    The returned function maps (log_a fp32 [B, L, R], x [B, L, R], h0 fp32 [B, R] | None)
    to (h float32 [B, L, R], h_last float32 [B, R]).
    """

    def scan(
        log_a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_linear_scan_inputs(log_a, x, h0)
        tokens = fold_initial_state(log_a, x, h0).float()
        gates = torch.exp(log_a)
        states = gate_scan(
            gates.transpose(1, 2).contiguous(), tokens.transpose(1, 2).contiguous()
        ).transpose(1, 2)
        return states, last_state(states)

    return _graph_break(scan)
