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
shape", profiled the same steps so.) ``--peer accelerated_scan.scalar`` (or another of the
benchmark's peer rows, ``benchmark_steps.peer_steps``, where installed) runs that public
scan's step on the same shape instead (its kernels: ``regex:(forward|backward)_scan``), for
the side-by-side profile of "The decay's exponential on the FMA pipe".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from samu_kernels.backends import DEFAULT_BACKENDS, check_backend
from samu_kernels.benchmark_steps import Step, peer_steps, scan_step
from samu_kernels.compare_tiles import parse_shape
from samu_kernels.controllers import default_controller


def run_steps(step: Step, leaves: list[torch.Tensor], steps: int) -> None:
    """``steps`` runs of the forward + backward ``step`` (its ``leaves``' gradients cleared
    before each), then a synchronisation."""
    for _ in range(steps):
        for leaf in leaves:
            leaf.grad = None
        step()
    torch.cuda.synchronize()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(DEFAULT_BACKENDS), help="our scan to run")
    parser.add_argument(
        "--peer", help="a public scan to run instead of ours (accelerated_scan.scalar, ...)"
    )
    parser.add_argument(
        "--shape", required=True, help="B,L,R or a reference case name (state2560_medium)"
    )
    parser.add_argument("--backend", help="backend name (default: the architecture's)")
    parser.add_argument(
        "--steps", type=int, default=6, help="forward + backward steps (default 6, at least 1)"
    )
    args = parser.parse_args(argv)
    if (args.arch is None) == (args.peer is None):
        parser.error("give one of --arch (our scan) and --peer (a public one)")
    if args.peer is not None and args.backend is not None:
        parser.error("--backend names one of our backends; it does not go with --peer")
    try:
        shape = parse_shape(args.shape)
        if args.arch is not None:
            backend = args.backend or DEFAULT_BACKENDS[args.arch]
            check_backend(args.arch, backend, default_controller(args.arch))
    except ValueError as error:
        parser.error(str(error))
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    if not torch.cuda.is_available():
        print("error: profile_scan_steps needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    if args.peer is None:
        step, leaves = scan_step(args.arch, shape, backend, device)
        name = f"{args.arch} {backend}"
    else:
        peers = peer_steps(shape, device)
        if args.peer not in peers:
            print(
                f"error: --peer {args.peer!r} is not an installed peer; installed: "
                f"{sorted(peers) or 'none (pip install accelerated-scan / fla-core)'}",
                file=sys.stderr,
            )
            return 2
        step, leaves = peers[args.peer]
        name = args.peer
    run_steps(step, leaves, args.steps)
    print(f"{args.steps} steps of {name} on {list(shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
