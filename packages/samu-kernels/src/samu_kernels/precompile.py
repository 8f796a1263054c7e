"""Compile the benchmark's Triton kernels in parallel processes before anything is timed.

Triton compiles a kernel in the thread that first launches it, one kernel at a time, and a
sweep launches hundreds of distinct kernels (every geometry specialises its own). Each
:class:`CompileTask` runs one step once in a worker process; the compiled kernels land in
Triton's on-disk cache (``TRITON_CACHE_DIR``, default ``~/.triton/cache``), where the
timing process then finds them instead of compiling. A task launches exactly what the
timed step launches (same shapes, dtypes and geometry), so the cache keys match. A task
that fails (a geometry a Triton version cannot compile, say) is reported, not raised, so
that one bad geometry does not cost a whole sweep.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat

import torch

from samu_kernels.benchmark_steps import scan_step
from samu_kernels.common.geometry import set_tile_override, tile_override_kept

__all__ = ["CompileTask", "PrecompileReport", "compile_task", "precompile"]


@dataclass(frozen=True)
class CompileTask:
    """One step whose kernels must be compiled."""

    architecture: str
    """'rglru' or 'samu'."""
    backend: str
    shape: tuple[int, int, int]
    """[B, L, R]."""
    geometry: str = ""
    """The ``SAMU_KERNELS_TILE`` value to launch with (empty: the heuristic's)."""
    channels_first: bool = False
    """The sequences as [B, R, L] (the channels-first kernels)."""


@dataclass(frozen=True)
class PrecompileReport:
    """What :func:`precompile` did."""

    seconds: float
    failures: dict[CompileTask, str]
    """The tasks that raised, with the first line of their error."""


def compile_task(task: CompileTask, device: str) -> None:
    """Run ``task``'s step once on ``device`` (compiling what it launches); the process's
    ``SAMU_KERNELS_TILE`` is left as the task set it."""
    set_tile_override(task.geometry)
    step, _ = scan_step(
        task.architecture,
        task.shape,
        task.backend,
        torch.device(device),
        channels_first=task.channels_first,
    )
    step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _failure(task: CompileTask, device: str) -> str | None:
    """The first line of the error ``task`` raises (its type if it has no message), or None."""
    try:
        compile_task(task, device)
    except Exception as error:  # any failure is reported with its task
        lines = str(error).strip().splitlines()
        return f"{type(error).__name__}: {lines[0] if lines else ''}"
    return None


def precompile(tasks: Sequence[CompileTask], jobs: int, device: str = "cuda") -> PrecompileReport:
    """Run every task, spread over ``jobs`` spawned processes (in this process for
    ``jobs <= 1``); report the wall time and the tasks that failed.

    The caller's ``SAMU_KERNELS_TILE`` is restored afterwards. Workers are spawned, not
    forked (CUDA cannot be used in a forked child), and share Triton's on-disk cache.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    started = time.perf_counter()
    with tile_override_kept():
        if jobs == 1 or len(tasks) <= 1:
            outcomes = [_failure(task, device) for task in tasks]
        else:
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=context) as pool:
                outcomes = list(pool.map(_failure, tasks, repeat(device)))
    failures = {
        task: message for task, message in zip(tasks, outcomes, strict=True) if message is not None
    }
    return PrecompileReport(time.perf_counter() - started, failures)
