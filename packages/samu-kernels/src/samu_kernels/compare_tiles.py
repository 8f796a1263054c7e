"""Launch geometries against each other: one scan, one shape, interleaved A/B rounds.

Run on a CUDA GPU::

    python -m samu_kernels.compare_tiles --arch samu --shape 1,8192,2560 \\
        --tile heuristic --tile programs=132 --tile split=8,tile_rows=256 --out ab.json

Each ``--tile`` is a ``SAMU_KERNELS_TILE`` value (``heuristic``: none, the launcher's own
geometry); the first is the baseline the others are divided by. All of them are compiled
first (``precompile.py``), then each round times every geometry once, in order and
reversed by turns (A B C, C B A, A B C, ...), so that a drift of the machine (clocks, a
neighbour's load) falls on every geometry alike; a geometry's time is the median of its
rounds (forward + backward of bf16 inputs, device ms from a CUDA-graph replay, as
``samu_kernels.benchmark`` times). ``--kernels`` also times each geometry's kernels one by
one under ``torch.profiler`` (device ms per step, eager launches), which shows whether the
forward, the backward or the parameter-gradient reduction moved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import torch

from samu_kernels.backends import DEFAULT_BACKENDS, check_backend
from samu_kernels.benchmark import REFERENCE_SHAPES, provenance, time_step
from samu_kernels.benchmark_steps import Step, scan_step
from samu_kernels.common.geometry import (
    TILE_ENV,
    parse_tile_override,
    set_tile_override,
    tile_override_kept,
)
from samu_kernels.controllers import default_controller
from samu_kernels.precompile import CompileTask, precompile
from samu_kernels.result_file import add_result_file_options, refuse_unwritable_result_file

__all__ = [
    "HEURISTIC",
    "MIN_ROUNDS",
    "GeometryTiming",
    "compare_tiles",
    "interleaved_rounds",
    "kernel_times",
    "main",
    "parse_shape",
    "refuse_too_few_rounds",
    "set_medians",
    "write_timings",
]

Variant = TypeVar("Variant")

HEURISTIC = "heuristic"
"""The ``--tile`` value that sets no ``SAMU_KERNELS_TILE`` (the launcher's geometry)."""


@dataclass
class GeometryTiming:
    """One geometry's rounds (device ms, in the order they ran) and what follows from them."""

    tile: str
    rounds_ms: list[float] = field(default_factory=list)
    median_ms: float = 0.0
    relative: float = 0.0
    """median_ms over the baseline's (the first geometry's)."""
    kernels_ms: dict[str, float] = field(default_factory=dict)
    """Device ms per step of each kernel, by name (``--kernels`` only)."""


MIN_ROUNDS = 2
"""Interleaved rounds need one in each order."""


def refuse_too_few_rounds(parser: argparse.ArgumentParser, rounds: int) -> None:
    """Exit through ``parser.error`` (status 2) where ``--rounds`` is below MIN_ROUNDS."""
    if rounds < MIN_ROUNDS:
        parser.error(f"--rounds must be at least {MIN_ROUNDS} (one each way), got {rounds}")


def interleaved_rounds(variants: Sequence[Variant], rounds: int) -> list[list[Variant]]:
    """The order of each round: ``variants`` as given, then reversed, by turns."""
    return [
        list(variants) if index % 2 == 0 else list(reversed(variants)) for index in range(rounds)
    ]


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"1,8192,2560"`` or a reference case name (``state2560_medium``) -> (B, L, R)."""
    if text in REFERENCE_SHAPES:
        return REFERENCE_SHAPES[text]
    parts = text.split(",")
    if len(parts) != 3 or not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise ValueError(
            f"expected B,L,R (three positive integers) or one of {sorted(REFERENCE_SHAPES)}, "
            f"got {text!r}"
        )
    batch, length, width = (int(part) for part in parts)
    return batch, length, width


def kernel_times(step: Step, leaves: Sequence[torch.Tensor], steps: int = 10) -> dict[str, float]:
    """Device ms per step of every kernel ``step`` launches (its name cut to 60 characters),
    slowest first, over ``steps`` eager steps under ``torch.profiler``; the leaves' gradients
    are dropped before each step, so no accumulation kernel is counted."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    def fresh_step() -> None:
        for leaf in leaves:
            leaf.grad = None
        step()

    for _ in range(3):
        fresh_step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(steps):
            fresh_step()
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in profiler.key_averages():
        microseconds = event.self_device_time_total
        if microseconds > 0:
            name = event.key[:60]
            totals[name] = totals.get(name, 0.0) + microseconds / 1000 / steps
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def compare_tiles(
    device: torch.device,
    architecture: str,
    backend: str,
    shape: tuple[int, int, int],
    tiles: Sequence[str],
    *,
    rounds: int = 4,
    jobs: int = 1,
    profile_kernels: bool = False,
) -> list[GeometryTiming]:
    """Time ``tiles`` (``SAMU_KERNELS_TILE`` values, :data:`HEURISTIC` for none) on one
    scan step, ``rounds`` interleaved rounds (:func:`interleaved_rounds`); the kernels are
    compiled first in ``jobs`` processes. The caller's ``SAMU_KERNELS_TILE`` is restored.

    Raises:
        RuntimeError: naming the geometries whose kernels failed to compile.
    """
    override = {tile: "" if tile == HEURISTIC else tile for tile in tiles}
    tasks = [CompileTask(architecture, backend, shape, override[tile]) for tile in tiles]
    report = precompile(tasks, jobs, str(device))
    if report.failures:
        failed = "; ".join(f"{t.geometry or HEURISTIC}: {m}" for t, m in report.failures.items())
        raise RuntimeError(f"these --tile geometries did not compile: {failed}")
    timings = {tile: GeometryTiming(tile) for tile in tiles}
    with tile_override_kept():
        step, leaves = scan_step(architecture, shape, backend, device)
        for order in interleaved_rounds(tiles, rounds):
            for tile in order:
                set_tile_override(override[tile])
                timings[tile].rounds_ms.append(time_step(step, leaves, quick=True).device_ms)
        if profile_kernels:
            for tile in tiles:
                set_tile_override(override[tile])
                timings[tile].kernels_ms = kernel_times(step, leaves)
    set_medians(list(timings.values()))
    return list(timings.values())


def write_timings(
    path: Path,
    device: torch.device,
    architecture: str,
    backend: str,
    shape: tuple[int, int, int],
    rounds: int,
    timings: dict[str, object],
) -> None:
    """Write the result file of one interleaved timing run at ``path``: its provenance, the
    step timed (architecture, backend, [B, L, R] shape, rounds), then ``timings``."""
    document = {
        **provenance(device),
        "architecture": architecture,
        "backend": backend,
        "shape": list(shape),
        "rounds": rounds,
        **timings,
    }
    path.write_text(json.dumps(document, indent=2))


def set_medians(timings: Sequence[GeometryTiming]) -> None:
    """Fill each timing's median of its rounds and its ratio to the first one's."""
    baseline = statistics.median(timings[0].rounds_ms)
    for timing in timings:
        timing.median_ms = statistics.median(timing.rounds_ms)
        timing.relative = timing.median_ms / baseline


def _format_timing(timing: GeometryTiming, kernels: int = 3) -> str:
    spread = (max(timing.rounds_ms) - min(timing.rounds_ms)) / timing.median_ms
    line = (
        f"{timing.tile:48s} {timing.median_ms:9.4f} ms {timing.relative:6.3f}x "
        f"(spread {100 * spread:.1f} %)"
    )
    slowest = list(timing.kernels_ms.items())[:kernels]
    if slowest:
        line += "  " + "  ".join(f"{_short_name(name)} {ms:.4f}" for name, ms in slowest)
    return line


def _short_name(kernel: str) -> str:
    """A profiler kernel name without its return type and namespaces, cut to 28 characters
    (``void at::native::reduce_kernel<512, 1, ...>(...)`` -> ``reduce_kernel<512, 1, ...``)."""
    name = kernel.removeprefix("void ")
    head, bracket, rest = name.partition("<")
    return (head.rsplit("::", 1)[-1] + bracket + rest)[:28]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--arch", required=True, choices=sorted(DEFAULT_BACKENDS))
    parser.add_argument(
        "--backend", help="backend name (default: the architecture's default backend)"
    )
    parser.add_argument(
        "--shape",
        required=True,
        help=f"B,L,R or a reference case: {', '.join(REFERENCE_SHAPES)}",
    )
    parser.add_argument(
        "--tile",
        action="append",
        required=True,
        help=f"a {TILE_ENV} value, or '{HEURISTIC}'; give two or more, the first is the baseline",
    )
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    parser.add_argument(
        "--kernels", action="store_true", help="also time each kernel under torch.profiler"
    )
    add_result_file_options(parser)
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(16, os.cpu_count() or 1),
        help="processes that compile the kernels first (default: CPUs, at most 16)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m samu_kernels.compare_tiles --arch samu --shape ... --tile
    heuristic --tile programs=132``."""
    parser = _parser()
    args = parser.parse_args(argv)
    backend = args.backend or DEFAULT_BACKENDS[args.arch]
    try:
        shape = parse_shape(args.shape)
    except ValueError as error:
        parser.error(f"--shape: {error}")
    try:
        check_backend(args.arch, backend, default_controller(args.arch))
    except ValueError as error:
        parser.error(f"--backend: {error}")
    if len(args.tile) < 2:
        parser.error(f"--tile: give at least two geometries to compare, got {args.tile}")
    if len(set(args.tile)) != len(args.tile):
        parser.error(f"--tile: each geometry once, got {args.tile}")
    for tile in args.tile:
        if tile != HEURISTIC:
            try:
                parse_tile_override(tile)
            except ValueError as error:
                parser.error(f"--tile {tile!r}: {error}")
    refuse_too_few_rounds(parser, args.rounds)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    refuse_unwritable_result_file(parser, args.out, force=args.force)
    if not torch.cuda.is_available():
        print("samu_kernels.compare_tiles needs a CUDA GPU")
        return 2
    device = torch.device("cuda")
    try:
        timings = compare_tiles(
            device,
            args.arch,
            backend,
            shape,
            args.tile,
            rounds=args.rounds,
            jobs=args.jobs,
            profile_kernels=args.kernels,
        )
    except torch.cuda.OutOfMemoryError:
        print(f"--shape {list(shape)}: the step does not fit in the GPU's memory")
        return 1
    except RuntimeError as error:
        print(error)
        return 1
    print(f"{args.arch} {backend} {list(shape)} on {torch.cuda.get_device_name(device)}:")
    for timing in timings:
        print(_format_timing(timing))
    if args.out is not None:
        write_timings(
            args.out, device, args.arch, backend, shape, args.rounds,
            {"geometries": [asdict(timing) for timing in timings]},
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
