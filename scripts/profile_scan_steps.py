"""Run one scan's forward + backward a few times, for a profiler wrapped around the process.

``samu_kernels.benchmark`` and ``compare_tiles`` time the kernels from CUDA-graph replays;
Nsight Compute needs eager launches it can count and replay one by one. This script makes
exactly those: ``--steps`` forward + backward steps of one scan on bf16 inputs (the
benchmark's step, ``samu_kernels.benchmark_steps.scan_step``), then a synchronisation. The
first steps compile the kernels; skip their launches in the profiler. On a GPU, from the
repository root (no uv needed; ``SAMU_KERNELS_TILE`` sets the geometry as for the
benchmark)::

    PYTHONPATH=$(echo packages/*/src | tr ' ' :) ncu --clock-control none \\
        --kernel-name regex:'(forward|backward)_(split|persistent)_kernel' \\
        --launch-skip 4 --launch-count 2 --section SpeedOfLight --section Occupancy \\
        --section WarpStateStats --section SchedulerStats --section SourceCounters \\
        python scripts/profile_scan_steps.py --arch samu --shape state2560_medium

(docs/performance.md, "What the persistent pieces wait on, and what bounds the medium
shape", profiled the same steps so.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from samu_kernels.backends import DEFAULT_BACKENDS, check_backend
from samu_kernels.benchmark_steps import scan_step
from samu_kernels.compare_tiles import parse_shape
from samu_kernels.controllers import default_controller


def run_steps(architecture: str, shape: tuple[int, int, int], backend: str, steps: int) -> None:
    """``steps`` forward + backward steps of the ``architecture`` scan with ``backend`` on
    bf16 [B, L, R] inputs of ``shape`` on the current CUDA device, then a synchronisation."""
    step, leaves = scan_step(architecture, shape, backend, torch.device("cuda"))
    for _ in range(steps):
        for leaf in leaves:
            leaf.grad = None
        step()
    torch.cuda.synchronize()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, choices=sorted(DEFAULT_BACKENDS))
    parser.add_argument(
        "--shape", required=True, help="B,L,R or a reference case name (state2560_medium)"
    )
    parser.add_argument("--backend", help="backend name (default: the architecture's)")
    parser.add_argument(
        "--steps", type=int, default=6, help="forward + backward steps (default 6, at least 1)"
    )
    args = parser.parse_args(argv)
    try:
        shape = parse_shape(args.shape)
        backend = args.backend or DEFAULT_BACKENDS[args.arch]
        check_backend(args.arch, backend, default_controller(args.arch))
    except ValueError as error:
        parser.error(str(error))
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if not torch.cuda.is_available():
        print("error: profile_scan_steps needs a CUDA GPU", file=sys.stderr)
        return 2
    run_steps(args.arch, shape, backend, args.steps)
    print(f"{args.steps} steps of {args.arch} {backend} on {list(shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
