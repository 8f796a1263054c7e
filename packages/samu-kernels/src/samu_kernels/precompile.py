"""Compile the benchmark's Triton kernels in parallel processes before anything is timed.

Triton compiles a kernel in the thread that first launches it, one kernel at a time, and a
sweep launches hundreds of distinct kernels (every geometry specialises its own). Each
:class:`CompileTask` runs one step once in a worker process; the compiled kernels land in
Triton's on-disk cache (``TRITON_CACHE_DIR``, default ``~/.triton/cache``), where the
timing process then finds them instead of compiling. A task launches exactly what the
timed step launches (same shapes, dtypes and geometry), so the cache keys match.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat

import torch

from samu_kernels.benchmark_steps import scan_step
from samu_kernels.common.geometry import TILE_ENV

__all__ = ["CompileTask", "compile_task", "precompile"]


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


def compile_task(task: CompileTask, device: str) -> None:
    """Run ``task``'s step once on ``device`` (compiling what it launches); the process's
    ``SAMU_KERNELS_TILE`` is left as the task set it."""
    if task.geometry:
        os.environ[TILE_ENV] = task.geometry
    else:
        os.environ.pop(TILE_ENV, None)
    step, _ = scan_step(task.architecture, task.shape, task.backend, torch.device(device))
    step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def precompile(tasks: Sequence[CompileTask], jobs: int, device: str = "cuda") -> float:
    """Run every task, spread over ``jobs`` spawned processes (in this process for
    ``jobs <= 1``); return the wall time in seconds.

    The caller's ``SAMU_KERNELS_TILE`` is restored afterwards. Workers are spawned, not
    forked (CUDA cannot be used in a forked child), and share Triton's on-disk cache.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    started = time.perf_counter()
    previous = os.environ.get(TILE_ENV)
    try:
        if jobs == 1 or len(tasks) <= 1:
            for task in tasks:
                compile_task(task, device)
        else:
            context = multiprocessing.get_context("spawn")
            workers = min(jobs, len(tasks))
            with ProcessPoolExecutor(workers, mp_context=context) as pool:
                list(pool.map(compile_task, tasks, repeat(device)))
    finally:
        if previous is None:
            os.environ.pop(TILE_ENV, None)
        else:
            os.environ[TILE_ENV] = previous
    return time.perf_counter() - started
