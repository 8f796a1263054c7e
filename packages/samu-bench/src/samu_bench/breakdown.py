"""Where a training step's time goes: kernels (ops on a CPU) by category, from torch.profiler.

The protocol says how long a step takes; this says what it is made of. A row is warmed up
like a protocol row, then a few steps run under `torch.profiler`; every kernel's self time
on the device (on a CPU: every op's self CPU time) is summed per step and put in a
category by its name (matmul, scan, compiled fusion, ...). The steps are also timed
outside the profiler with the protocol's timer, so `busy` = kernel time / step time shows
how much of the step the device was idle (launch gaps, host work).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from samu_bench.instruments import timer_for
from samu_bench.protocol import ResidentRow

CATEGORY_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "matmul",
        ("gemm", "nvjet", "cutlass", "xmma", "cublas", "aten::mm", "aten::addmm", "aten::bmm"),
    ),
    (
        "scan",
        (
            "_runs_kernel",
            "run_summary_kernel",
            "prefix_kernel",
            "_sequential_kernel",
            "_split_kernel",
            "_chained_kernel",
            "hgrn",
            "forward_scan",
            "backward_scan",
            "samu_kernels::scan",
        ),
    ),
    ("samu layers", ("rms_norm", "gelu_tanh", "samu_kernels::")),
    ("compiled fusion", ("triton_", "compiledfxgraph")),
    ("optimizer", ("adam", "multi_tensor_apply", "_foreach")),
    ("conv", ("conv_depthwise", "convolution", "cudnn", "aten::conv")),
    ("memory", ("memcpy", "memset", "aten::copy_", "aten::fill_", "aten::zero_")),
    ("eager elementwise", ("elementwise", "reduce_kernel", "aten::")),
)
"""(category, name fragments) in matching order: a name takes the first category one of
whose fragments it contains (lowercased), else "other"."""

CATEGORIES: tuple[str, ...] = (*(name for name, _ in CATEGORY_PATTERNS), "other")
"""Every category, in report order."""


def categorize(name: str) -> str:
    """The category of a kernel or op named `name` (see :data:`CATEGORY_PATTERNS`)."""
    lowered = name.lower()
    for category, fragments in CATEGORY_PATTERNS:
        if any(fragment in lowered for fragment in fragments):
            return category
    return "other"


@dataclass(frozen=True)
class KernelTime:
    """One kernel (or op) of a step: its name, category, launches and time per step."""

    name: str
    category: str
    calls_per_step: float
    ms_per_step: float


@dataclass(frozen=True)
class StepBreakdown:
    """A row's step: its timed length, the kernel time in it by category, and its kernels.

    Attributes:
        row: the row's label (`architecture:backend[:controller]`).
        on_device: True for CUDA kernel times; False for a CPU's op times (self CPU time,
            summed over threads and slowed by the profiler: not comparable to `step_ms`).
        step_ms: median of the unprofiled steps, timed like protocol samples.
        kernel_ms: summed self time of every kernel (op) per profiled step.
        categories: kernel time per step by category (every category of `CATEGORIES`).
        kernels: every kernel (op), longest first.
    """

    row: str
    on_device: bool
    step_ms: float
    kernel_ms: float
    categories: dict[str, float]
    kernels: tuple[KernelTime, ...]

    @property
    def busy(self) -> float | None:
        """Kernel time / step time, the share of the step the GPU computed (None on a CPU)."""
        if not self.on_device or self.step_ms <= 0:
            return None
        return self.kernel_ms / self.step_ms

    def entry(self) -> dict[str, object]:
        """A JSON-ready dict of the breakdown."""
        return {
            "row": self.row,
            "step_ms": self.step_ms,
            "kernel_ms": self.kernel_ms,
            "busy": self.busy,
            "categories": self.categories,
            "kernels": [kernel.__dict__ for kernel in self.kernels],
        }


def _kernel_times(resident: ResidentRow, device: torch.device, steps: int) -> list[KernelTime]:
    """Profile `steps` steps and return every kernel's (op's) self time per step."""
    on_cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if on_cuda else ProfilerActivity.CPU]) as run:
        for _ in range(steps):
            resident.step()
        if on_cuda:
            torch.cuda.synchronize(device)
    kernels = []
    for event in run.key_averages():
        micros = event.self_device_time_total if on_cuda else event.self_cpu_time_total
        if micros <= 0:
            continue
        kernels.append(
            KernelTime(event.key, categorize(event.key), event.count / steps, micros / 1e3 / steps)
        )
    return sorted(kernels, key=lambda kernel: kernel.ms_per_step, reverse=True)


def step_breakdown(
    resident: ResidentRow, device: torch.device, *, warmup: int, steps: int
) -> StepBreakdown:
    """Warm `resident` up, time `steps` steps, then profile `steps` more.

    Args:
        resident: the row, built on `device` (compiled rows compile during warm-up; a
            step-graph row's step is captured after it).
        device: where it runs; CUDA profiles kernels, a CPU profiles ops.
        warmup: untimed steps first (>= 1).
        steps: timed steps, then as many profiled steps (>= 1).

    Raises:
        ValueError: `warmup` or `steps` is below 1.
    """
    if warmup < 1:
        raise ValueError(f"warmup must be at least 1, got {warmup}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    for _ in range(warmup):
        resident.step()
    if resident.row.step_graph:
        resident.prepare_capture()
        resident.capture_step()
    timer = timer_for(device)
    step_ms = statistics.median(timer.time_ms(resident.step) for _ in range(steps))
    kernels = _kernel_times(resident, device, steps)
    categories = dict.fromkeys(CATEGORIES, 0.0)
    for kernel in kernels:
        categories[kernel.category] += kernel.ms_per_step
    return StepBreakdown(
        resident.row.label,
        device.type == "cuda",
        step_ms,
        sum(kernel.ms_per_step for kernel in kernels),
        categories,
        tuple(kernels),
    )
