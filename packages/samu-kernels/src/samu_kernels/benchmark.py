"""Kernel benchmark: forward + backward of the scan backends against the copy bandwidth.

Run on a CUDA GPU::

    python -m samu_kernels.benchmark --out kernels.json
    python -m samu_kernels.benchmark --sweep --out sweep.json

``--sweep`` times each reference-file backend on each reference shape under a small grid of
launch geometries (``sweep_grid.py``, applied through ``SAMU_KERNELS_TILE``) next to the
peers, and prints the best geometry per (shape, backend) and the full table.

Before timing, every kernel our scans will launch in the run is compiled in ``--jobs``
spawned processes (``precompile.py``; default: the CPU count, at most 16), which fill
Triton's on-disk cache: a sweep specialises hundreds of kernels, and Triton compiles one at
a time in the launching thread. (The peers' few kernels compile in the timing process.)

It measures the device copy bandwidth (a large device-to-device copy, bytes read plus
written), then times forward + backward of each backend on each reference shape
(bfloat16), and of the public scans a user would otherwise
pick (fla-core's ``chunk_hgrn`` and ``fused_recurrent_hgrn``, ``accelerated_scan``: on its
own [B, C, T] layout, and once more with the transposes from [B, L, R] and back timed) when
they are importable. Bandwidth is *counted bytes* / time, where counted bytes are the
bytes a fused implementation must move at least (docs/kernels.md, "Counted bytes"):

* RG-LRU (inputs u, gate_x_logits, gate_a_logits, y; output y*h): forward reads 4 and
  writes 1 tensor, backward reads 5 (the inputs and dL/do) and writes 4: 14 tensors.
* SAMU (inputs u, y; output y*(h + skip*u)): forward reads 2, writes 1; backward reads 3,
  writes 2: 8 tensors.
* A plain linear scan (peers; inputs x and the decay): forward reads 2, writes 1;
  backward reads 3 (decay, h, dL/dh), writes 2: 8 tensors.

The default backends are timed once more on [B, R, L] sequences (``channels_first=True``,
the layout ``accelerated_scan`` is timed on), their rows named ``<backend> channels_first``.

A tensor is B*L*R elements of the compute dtype; fp32 states at chunk boundaries and
parameter gradients are left out (under 1% at chunk 16).

Two times per row: ``median_ms`` is device time, forward + backward replayed from a CUDA
graph (``triton.testing.do_bench_cudagraph``, median): what the kernels cost inside a
training step whose host work runs ahead of the GPU. ``launch_ms`` is the same step
launched from Python each time (``triton.testing.do_bench``, L2 flushed): it includes the
host overhead of the op (custom-op dispatch, autograd, Triton launches), which dominates
short problems. Bandwidth is computed from ``median_ms``; when a step cannot be captured
in a graph, ``median_ms`` is the launched time and ``timing`` says so.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

import torch

from samu_kernels import FAST_MATH_ENABLED, TANH_SIGMOID_ENABLED
from samu_kernels.backends import DEFAULT_BACKENDS, REFERENCE_FILE_ROWS, check_backend
from samu_kernels.benchmark_steps import Step, peer_steps, scan_step
from samu_kernels.common.geometry import (
    TILE_ENV,
    format_tile,
    set_tile_override,
    tile_override_kept,
)
from samu_kernels.controllers import FUSED_COORDS_CONTROLLER, default_controller
from samu_kernels.precompile import CompileTask, precompile
from samu_kernels.result_file import add_result_file_options, refuse_unwritable_result_file
from samu_kernels.sweep_grid import sweep_tiles

__all__ = [
    "GOAL_PERCENT_OF_COPY",
    "BenchmarkRow",
    "Timing",
    "benchmark_tasks",
    "goal_lines",
    "main",
    "measure_copy_bandwidth",
    "provenance",
    "run_benchmark",
    "run_sweep",
    "sweep_tasks",
    "time_step",
]

REFERENCE_SHAPES: dict[str, tuple[int, int, int]] = {
    "state2048_short": (4, 2048, 2048),
    "state2560_medium": (1, 8192, 2560),
    "400m_block_long": (1, 32768, 2048),
}
BACKENDS: tuple[tuple[str, str], ...] = (
    *((arch, backend) for arch, backend, _ in REFERENCE_FILE_ROWS),
    ("rglru", "fused_fused_output_fused_write_shared_sfu_grouped_prefix32_hierarchical_chunk16"),
    ("rglru", "fused_shared_sfu_chunk16"),
    ("samu", "fused_output_fused_write_shared_sfu_grouped_prefix32_hierarchical_chunk16"),
    ("samu", "fused_output_fused_write_shared_sfu_chunk16"),
)
CHANNELS_FIRST_BACKENDS: tuple[tuple[str, str], ...] = tuple(DEFAULT_BACKENDS.items())
"""Backends also timed on [B, R, L] sequences (``channels_first=True``), the layout
``accelerated_scan`` is timed on."""
CHANNELS_FIRST_SUFFIX = " channels_first"
COUNTED_TENSORS = {"rglru": 14, "samu": 8, "linear_scan": 8}
GOAL_PERCENT_OF_COPY = 70.0
"""The speed goal (docs/kernels.md, "Where the goal stands"): a default backend's forward +
backward reaches this share of the copy bandwidth (by counted bytes) on every reference
shape, and beats each peer there."""
REVISION_VARIABLE = "SAMU_GIT_REVISION"
"""Names the code's revision in result files where git cannot (``scripts/gpu_from_source.sh``
sets it): a copied checkout or a container whose .git is absent, or holds only the base
commit of uncommitted files (a remote GPU machine reported ``<base>-dirty`` for a tree that
was a later local commit). samu-bench's result files read the same variable."""


def provenance(device: torch.device) -> dict[str, Any]:
    """When and on what a result file was measured: the UTC time, the GPU, torch, Triton,
    CUDA and the code's revision as ``SAMU_GIT_REVISION`` names it (None where unset)."""
    import triton  # noqa: PLC0415 (GPU only)

    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "revision": os.environ.get(REVISION_VARIABLE),
    }


@dataclass(frozen=True)
class BenchmarkRow:
    """One timed (implementation, shape)."""

    implementation: str
    architecture: str
    case: str
    shape: tuple[int, int, int]
    median_ms: float
    counted_bytes: int
    gbps: float
    percent_of_copy: float
    launch_ms: float
    """Median with every step launched from Python (host overhead included)."""
    timing: str
    """``cuda_graph`` (median_ms is device time) or ``launch`` (capture failed)."""
    geometry: str = ""
    """The ``SAMU_KERNELS_TILE`` value timed (empty: the heuristic's)."""


def measure_copy_bandwidth(device: torch.device, nbytes: int = 2**31) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written per second)."""
    from triton.testing import do_bench  # noqa: PLC0415 (triton is optional; GPU only)

    source = torch.empty(nbytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    ms = do_bench(lambda: target.copy_(source), return_mode="median")
    return float(2 * nbytes / (ms * 1e-3) / 1e9)


@dataclass(frozen=True)
class Timing:
    """Forward + backward medians of one step (see the module docstring)."""

    device_ms: float
    launch_ms: float
    method: str


def time_step(step: Step, leaves: Sequence[torch.Tensor], *, quick: bool = False) -> Timing:
    """Device and launched medians of ``step`` (forward + backward; the ``leaves``'
    gradients dropped between repetitions); ``quick`` takes a shorter warm-up and budget."""
    # triton is optional (GPU only)
    from triton.testing import do_bench, do_bench_cudagraph  # noqa: PLC0415

    budget = {"warmup": 10, "rep": 40} if quick else {}
    launch_ms = float(do_bench(step, grad_to_none=list(leaves), return_mode="median", **budget))
    try:
        device_ms = float(do_bench_cudagraph(step, grad_to_none=list(leaves), return_mode="median"))
    except RuntimeError as error:  # a step that syncs or allocates on the host
        print(f"  (not capturable in a CUDA graph, launched time used: {error})"[:200])
        torch.cuda.synchronize()
        return Timing(launch_ms, launch_ms, "launch")
    return Timing(device_ms, launch_ms, "cuda_graph")


def benchmark_tasks(
    backends: Sequence[tuple[str, str]] = BACKENDS,
    channels_first: Sequence[tuple[str, str]] = CHANNELS_FIRST_BACKENDS,
) -> list[CompileTask]:
    """Every ((architecture, backend) of ``backends``, reference shape) :func:`run_benchmark`
    times, at the geometry it will be timed with (``SAMU_KERNELS_TILE`` if set, else the
    heuristic's), then those of ``channels_first`` on [B, R, L] sequences."""
    geometry = os.environ.get(TILE_ENV, "")
    return [
        CompileTask(architecture, backend, shape, geometry, channels_first=first)
        for shape in REFERENCE_SHAPES.values()
        for first, pairs in ((False, backends), (True, channels_first))
        for architecture, backend in pairs
    ]


def implementation_name(task: CompileTask) -> str:
    """A row's implementation: the backend name, with :data:`CHANNELS_FIRST_SUFFIX` for
    channels-first sequences."""
    return task.backend + (CHANNELS_FIRST_SUFFIX if task.channels_first else "")


def run_benchmark(
    device: torch.device,
    jobs: int = 1,
    backends: Sequence[tuple[str, str]] = BACKENDS,
    channels_first: Sequence[tuple[str, str]] = CHANNELS_FIRST_BACKENDS,
) -> tuple[float, list[BenchmarkRow]]:
    """Copy bandwidth (GB/s) and one row per (implementation, reference shape): each
    (architecture, backend) of ``backends``, each of ``channels_first`` on [B, R, L]
    sequences, and each importable peer. The kernels are compiled first in ``jobs``
    processes (:func:`precompile`); a backend whose kernels fail to compile on a shape is
    left out there."""
    planned = benchmark_tasks(backends, channels_first)
    failed = _precompile(planned, jobs, device)
    copy_gbps = measure_copy_bandwidth(device)
    rows = []
    for case, shape in REFERENCE_SHAPES.items():
        candidates: list[tuple[str, str, Step, list[torch.Tensor]]] = []
        for task in planned:
            if task.shape == shape and task not in failed:
                step, leaves = scan_step(
                    task.architecture,
                    shape,
                    task.backend,
                    device,
                    channels_first=task.channels_first,
                )
                candidates.append((implementation_name(task), task.architecture, step, leaves))
        for name, (step, leaves) in peer_steps(shape, device).items():
            candidates.append((name, "linear_scan", step, leaves))
        for name, architecture, step, leaves in candidates:
            rows.append(_row(name, architecture, case, shape, time_step(step, leaves), copy_gbps))
        del candidates
        torch.cuda.empty_cache()
    return copy_gbps, rows


def _precompile(tasks: Sequence[CompileTask], jobs: int, device: torch.device) -> set[CompileTask]:
    """Compile ``tasks`` on ``device`` (:func:`precompile`), print what happened; return the
    failed tasks."""
    report = precompile(tasks, jobs, str(device))
    print(
        f"compiled the kernels of {len(tasks)} steps in {report.seconds:.0f} s "
        f"({jobs} processes, {len(report.failures)} failed)"
    )
    for task, message in report.failures.items():
        print(f"  not timed: {task.backend} {task.shape} {task.geometry or 'heuristic'}: {message}")
    return set(report.failures)


def _row(
    name: str,
    architecture: str,
    case: str,
    shape: tuple[int, int, int],
    timing: Timing,
    copy_gbps: float,
    geometry: str = "",
) -> BenchmarkRow:
    """The row of one timing, printed as it is made."""
    counted = COUNTED_TENSORS[architecture] * math.prod(shape) * 2
    gbps = counted / (timing.device_ms * 1e-3) / 1e9
    row = BenchmarkRow(
        name,
        architecture,
        case,
        shape,
        timing.device_ms,
        counted,
        gbps,
        100 * gbps / copy_gbps,
        timing.launch_ms,
        timing.method,
        geometry,
    )
    print(_format_row(row), flush=True)
    return row


def _format_row(row: BenchmarkRow) -> str:
    return (
        f"{row.case:18s} {row.architecture:11s} {row.implementation:72s} "
        f"{row.median_ms:8.3f} ms {row.gbps:7.0f} GB/s {row.percent_of_copy:5.1f}%  "
        f"launched {row.launch_ms:7.3f} ms  {row.geometry}"
    )


def sweep_tasks(multiprocessors: int) -> list[CompileTask]:
    """Every (reference-file backend, reference shape, geometry) :func:`run_sweep` times,
    grouped by shape, then backend; geometries come from :func:`sweep_tiles`."""
    return [
        CompileTask(architecture, backend, shape, format_tile(tile))
        for shape in REFERENCE_SHAPES.values()
        for architecture, backend, controller in REFERENCE_FILE_ROWS
        for tile in sweep_tiles(
            backend, shape, multiprocessors, tma_loads=controller == FUSED_COORDS_CONTROLLER
        )
    ]


def run_sweep(device: torch.device, jobs: int = 1) -> tuple[float, list[BenchmarkRow]]:
    """Copy bandwidth (GB/s) and one row per sweep task (:func:`sweep_tasks`), plus one per
    (peer, shape); the kernels are compiled first in ``jobs`` processes, and a geometry that
    fails to compile is left out."""
    multiprocessors = torch.cuda.get_device_properties(device).multi_processor_count
    planned = sweep_tasks(multiprocessors)
    failed = _precompile(planned, jobs, device)
    tasks = [task for task in planned if task not in failed]
    copy_gbps = measure_copy_bandwidth(device)
    rows = []
    with tile_override_kept():
        for case, shape in REFERENCE_SHAPES.items():
            made_for: tuple[str, str] | None = None
            for task in (task for task in tasks if task.shape == shape):
                if made_for != (task.architecture, task.backend):
                    made_for = (task.architecture, task.backend)
                    step, leaves = scan_step(task.architecture, shape, task.backend, device)
                set_tile_override(task.geometry)
                timing = time_step(step, leaves, quick=True)
                rows.append(
                    _row(
                        task.backend,
                        task.architecture,
                        case,
                        shape,
                        timing,
                        copy_gbps,
                        task.geometry,
                    )
                )
            set_tile_override("")
            for name, (step, leaves) in peer_steps(shape, device).items():
                rows.append(
                    _row(name, "linear_scan", case, shape, time_step(step, leaves), copy_gbps)
                )
            torch.cuda.empty_cache()
    return copy_gbps, rows


def best_rows(rows: Sequence[BenchmarkRow]) -> list[BenchmarkRow]:
    """The fastest row per (case, implementation), in first-seen order."""
    best: dict[tuple[str, str], BenchmarkRow] = {}
    for row in rows:
        key = (row.case, row.implementation)
        if key not in best or row.median_ms < best[key].median_ms:
            best[key] = row
    return list(best.values())


def goal_lines(rows: Sequence[BenchmarkRow]) -> list[str]:
    """The speed goal, per reference shape and default backend (``DEFAULT_BACKENDS``, on
    [B, L, R] and on channels-first sequences): the row's % of copy bandwidth against
    ``GOAL_PERCENT_OF_COPY``, and its time over each peer's on the same shape (below 1: ours
    is faster). Shapes without a default backend's
    row are left out; without any, there are no lines."""
    lines: list[str] = []
    for case in dict.fromkeys(row.case for row in rows):
        peers = [row for row in rows if row.case == case and row.architecture == "linear_scan"]
        for (architecture, backend), suffix in itertools.product(
            DEFAULT_BACKENDS.items(), ("", CHANNELS_FIRST_SUFFIX)
        ):
            key = (case, architecture, backend + suffix)
            ours = next(
                (r for r in rows if (r.case, r.architecture, r.implementation) == key), None
            )
            if ours is None:
                continue
            percent = ours.percent_of_copy
            verdict = "met" if percent >= GOAL_PERCENT_OF_COPY else "not met"
            ratios = ", ".join(
                f"{peer.implementation} {ours.median_ms / peer.median_ms:.2f}x" for peer in peers
            )
            lines.append(
                f"{case:18s} {architecture:5s}{suffix} {percent:5.1f} % of copy ({verdict}); "
                f"{ratios}"
            )
    header = (
        f"goal: >= {GOAL_PERCENT_OF_COPY:.0f} % of copy, faster than each peer "
        "(time over the peer's < 1)"
    )
    return [header, *lines] if lines else []


def _backend_choice(parser: argparse.ArgumentParser, text: str) -> tuple[str, str]:
    """``ARCH:NAME`` of ``--backend`` as (architecture, backend), checked as the scans will
    check it; a bad one exits through ``parser.error`` naming what is wrong."""
    architecture, colon, backend = text.partition(":")
    if not colon or not backend:
        parser.error(
            f"--backend: expected ARCH:NAME with ARCH one of {sorted(DEFAULT_BACKENDS)}, "
            f"e.g. samu:{DEFAULT_BACKENDS['samu']}; got {text!r}"
        )
    try:
        spec = check_backend(architecture, backend, default_controller(architecture))
    except ValueError as error:
        parser.error(f"--backend {text!r}: {error}")
    if not spec.is_triton:
        parser.error(f"--backend {text!r}: the benchmark times Triton backends (chunk<T> names)")
    return architecture, backend


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m samu_kernels.benchmark --out results.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    add_result_file_options(parser, required=True)
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="time the reference-file backends under a grid of launch geometries",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(16, os.cpu_count() or 1),
        help="processes that compile the kernels before timing (default: CPUs, at most 16)",
    )
    parser.add_argument(
        "--backend",
        action="append",
        metavar="ARCH:NAME",
        help="time this backend (repeatable; e.g. samu:" + DEFAULT_BACKENDS["samu"] + ") "
        "instead of the reference-file names, their variants and the defaults on [B, R, L] "
        "sequences; the peers are timed too",
    )
    args = parser.parse_args(argv)
    if args.backend and args.sweep:
        parser.error("--backend: --sweep times the reference-file names; give one or the other")
    chosen = dict.fromkeys(_backend_choice(parser, text) for text in args.backend or ())
    backends = tuple(chosen) or BACKENDS
    refuse_unwritable_result_file(parser, args.out, force=args.force)
    if not torch.cuda.is_available():
        print("samu_kernels.benchmark needs a CUDA GPU")
        return 2
    device = torch.device("cuda")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.sweep:
        copy_gbps, rows = run_sweep(device, args.jobs)
        summary = [
            f"best geometry per (shape, implementation) ({TILE_ENV} values):",
            *(_format_row(row) for row in best_rows(rows)),
        ]
    else:
        # Chosen backends are timed on [B, L, R] alone.
        channels_first = () if args.backend else CHANNELS_FIRST_BACKENDS
        copy_gbps, rows = run_benchmark(device, args.jobs, backends, channels_first)
        summary = goal_lines(rows)
    print(f"copy bandwidth: {copy_gbps:.0f} GB/s ({torch.cuda.get_device_name(device)})")
    for line in summary:
        print(line)
    args.out.write_text(
        json.dumps(
            {
                **provenance(device),
                "fast_math": FAST_MATH_ENABLED,
                "tanh_sigmoid": TANH_SIGMOID_ENABLED,
                "copy_bandwidth_gbps": copy_gbps,
                "default_backends": DEFAULT_BACKENDS,
                "sweep": args.sweep,
                "rows": [asdict(row) for row in rows],
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
