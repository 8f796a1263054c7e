"""A roofline floor for one training step of a row: FLOPs, minimal bytes, fastest time.

Model (documented in `docs/benchmarking.md`):

- Matrix products, forward and backward: `6 * tokens * W` FLOPs, with `W` the matmul
  weights of the block (MLP `9 D^2`, linear branches `3 D R`, RG-LRU gates `2 R^2 / H`).
  They run on tensor cores at the GPU's bf16 matmul rate.
- Everything else (norms, GELU, conv, gates, scan, AdamW) is memory-bound; its FLOPs are
  counted roughly for the record but assumed hidden under its memory traffic.
- Minimal bytes, as if all non-matmul work were fused perfectly: the fp32 input, output
  and their gradients (`16 N D`), the scan's bf16 operands forward and backward
  (`16 N R`; RG-LRU's two gate-logit tensors add `12 N R`), and per parameter an fp32
  read in the forward, the gradient write and fused AdamW's 4 reads and 3 writes
  (`36 P`).
- Floor time = matmul FLOPs / matmul rate + minimal bytes / copy bandwidth (the two kinds
  of work run one after the other on one stream).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NUM_HEADS = 16
MLP_EXPANSION = 3

_ELEMENTWISE_FLOPS_PER_WIDTH = 130
"""Rough forward + backward FLOPs per token and model channel: 2 RMSNorms, residuals, GELU
gating of the 3x wider MLP hidden layer."""
_ELEMENTWISE_FLOPS_PER_RNN_WIDTH = 100
"""Rough forward + backward FLOPs per token and recurrence channel: conv, GELU of y, gates,
scan."""
_OPTIMIZER_FLOPS_PER_PARAMETER = 16


@dataclass(frozen=True)
class GpuPeak:
    """Peak rates of a GPU: dense bf16 matmul (TFLOP/s) and copy bandwidth (TB/s)."""

    matmul_tflops: float
    copy_tbps: float
    source: str


GPU_PEAKS: Mapping[str, GpuPeak] = types.MappingProxyType(
    {
        "NVIDIA H200": GpuPeak(
            772.0, 4.14, "measured here: 8192-cube bf16 matmul and a large device copy"
        ),
        "NVIDIA H800 PCIe": GpuPeak(
            756.0,
            2.0,
            "datasheet lead (dense BF16 tensor cores, HBM2e of the H100/H800 PCIe), not measured",
        ),
    }
)
"""Known GPUs by `torch.cuda.get_device_name()`; any other GPU gets no floor."""


@dataclass(frozen=True)
class StepWork:
    """Work of one training step: matmul FLOPs, other FLOPs (rough) and minimal bytes."""

    matmul_flops: float
    elementwise_flops: float
    minimal_bytes: float

    @property
    def flops(self) -> float:
        """All FLOPs of the step."""
        return self.matmul_flops + self.elementwise_flops

    def floor_ms(self, gpu: GpuPeak) -> float:
        """Fastest possible step on `gpu` under the model (ms)."""
        seconds = self.matmul_flops / (gpu.matmul_tflops * 1e12) + self.minimal_bytes / (
            gpu.copy_tbps * 1e12
        )
        return seconds * 1e3


def step_work(
    *,
    batch: int,
    length: int,
    width: int,
    rnn_width: int,
    architecture: str,
    parameters: int,
) -> StepWork | None:
    """The work of one step of an `architecture` ("rglru"/"samu") block; None otherwise.

    `parameters` is the block's trainable parameter count (the optimizer's traffic).
    """
    if architecture not in ("rglru", "samu"):
        return None
    tokens = batch * length
    d, r = width, rnn_width
    rglru = architecture == "rglru"
    matmul_weights = (
        3 * MLP_EXPANSION * d * d + 3 * d * r + (2 * r * r // NUM_HEADS if rglru else 0)
    )
    scan_bytes_per_channel = 16 + (12 if rglru else 0)
    return StepWork(
        matmul_flops=6.0 * tokens * matmul_weights,
        elementwise_flops=float(
            tokens * (_ELEMENTWISE_FLOPS_PER_WIDTH * d + _ELEMENTWISE_FLOPS_PER_RNN_WIDTH * r)
            + _OPTIMIZER_FLOPS_PER_PARAMETER * parameters
        ),
        minimal_bytes=float(
            16 * tokens * d + scan_bytes_per_channel * tokens * r + 36 * parameters
        ),
    )


def row_floor_ms(
    gpu_name: str | None, case: Mapping[str, Any], row: Mapping[str, Any]
) -> float | None:
    """Floor time (ms) of a result-file row on GPU `gpu_name`; None if unknown GPU or block."""
    gpu = GPU_PEAKS.get(gpu_name or "")
    if gpu is None:
        return None
    work = step_work(
        batch=case["batch"],
        length=case["length"],
        width=case["config"]["width"],
        rnn_width=case["config"]["rnn_width"],
        architecture=row["architecture"],
        parameters=row["parameters"],
    )
    return None if work is None else work.floor_ms(gpu)
