"""Speed-of-light ablations of the time-split scans: what each part of a tile costs in time.

The time-split kernels (``samu_kernels.common.split``) are bound by latency, not by bytes or
issue slots (docs/performance.md, "The SAMU default's tile loops counted"), so an
instruction count does not say which part of a tile to shorten. Each ablation here is a copy
of ``split.py`` with some of its helpers replaced by cheap stand-ins of the same signature,
timed against the kernels themselves in interleaved rounds (the method of
``samu_kernels.compare_tiles``). The ablated kernels compute wrong results by design (they
are timed, never used), except ``tree``, a reassociation that is correct up to rounding,
and ``rejoin``, the form the kernels replaced (exact):

- ``nojoin``: :func:`tiles.enter_segments` without the exchange through shared memory (each
  segment entered with the carry): the join's shared-memory round trip and barriers.
- ``nogates``: :func:`chunk.gates_of_row` as one FMA (no sigmoids, exp2, square root). Its
  decay is not bounded by 1, so alone its states can overflow (timed so, 14x slower):
  time it with ``nochain``, whose chains are sums.
- ``nograd``: :func:`chunk.input_gradients` as its two stores (no gradient arithmetic, and
  none of the gate values it keeps live through the reverse walk).
- ``nochain``: the segment steps and states without their chains of dependent FMAs.
- ``tree``: the segment steps (forward and reverse) composed as balanced trees, depth
  log2(S) instead of S - 1, the same operations.
- ``rejoin``: the backward's states joined across the tile from its first checkpoint
  (:func:`tiles.join_from_first_checkpoint`), as before
  :func:`tiles.entering_from_checkpoints`.

Run on a GPU from the repository root (no uv needed)::

    PYTHONPATH=$(echo packages/*/src | tr ' ' :) python scripts/ablate_scan_kernels.py \\
        --shape state2560_medium --ablation nojoin --ablation tree --out ablations.json

``SAMU_KERNELS_TILE`` sets the geometry as for the benchmark. On a CPU, ``--stats`` compiles
each ablation's kernels for sm_90 instead and prints their registers and SASS counts
(``scripts/check_kernels_compile.py --stats``; pass its options after ``--``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samu_kernels.compare_tiles import GeometryTiming

STAND_INS: dict[str, str] = {
    "nojoin": """
@triton.jit
def enter_segments(seg_a, seg_x, carry, SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr,
                   REVERSE: tl.constexpr):  # fmt: skip
    return carry, seg_a * carry + seg_x
""",
    "nogates": """
@triton.jit
def gates_of_row(first, second, third, start, mask, decay_scale, w_a, w_x, b_a, b_x,
                 GATE_MODE: tl.constexpr, SHARED_SFU: tl.constexpr,
                 HAS_RESETS: tl.constexpr):  # fmt: skip
    a = tl.where(mask, first * decay_scale + w_a, 1.0)
    x = tl.where(mask, first, 0.0)
    return a, x, a, a, first, first, first
""",
    "nograd": """
@triton.jit
def input_gradients(D_U, D_GATE_X, D_GATE_A, D_Y, offs, mask, start, h, x, dh, d_out, g, a2,
                    m, gate_in, gate_decay, u, decay_scale, w_a, w_x, skip,
                    GATE_MODE: tl.constexpr, OUT_MODE: tl.constexpr,
                    SHARED_SFU: tl.constexpr):  # fmt: skip
    tl.store(D_Y + offs, (d_out * h).to(D_Y.dtype.element_ty), mask=mask)
    tl.store(D_U + offs, (dh * m).to(D_U.dtype.element_ty), mask=mask)
    return dh, dh, dh, dh, dh, dh
""",
    "nochain": """
@triton.jit
def segment_steps(a_rows, x_rows, S: tl.constexpr):
    h = x_rows[0]
    decay = a_rows[0]
    for k in tl.static_range(1, S):
        h = h + x_rows[k] * a_rows[k]
        decay = decay + a_rows[k]
    return decay, h


@triton.jit
def states_from(entering, a_rows, x_rows, S: tl.constexpr):
    states = ()
    for k in tl.static_range(S):
        states = states + (a_rows[k] * entering + x_rows[k],)
    return states


@triton.jit
def reverse_segment_steps(a_rows, g_rows, S: tl.constexpr):
    c = a_rows[S - 1] * g_rows[S - 1]
    decay = a_rows[S - 1]
    for k in tl.static_range(S - 2, -1, -1):
        c = c + a_rows[k] * g_rows[k]
        decay = decay + a_rows[k]
    return decay, c
""",
    "tree": """
@triton.jit
def _tree_steps(a_rows, x_rows, first: tl.constexpr, n: tl.constexpr):
    if n == 1:
        return a_rows[first], x_rows[first]
    else:
        a_early, x_early = _tree_steps(a_rows, x_rows, first, n // 2)
        a_late, x_late = _tree_steps(a_rows, x_rows, first + n // 2, n // 2)
        return a_late * a_early, a_late * x_early + x_late


@triton.jit
def segment_steps(a_rows, x_rows, S: tl.constexpr):
    decay, h = _tree_steps(a_rows, x_rows, 0, S)
    return decay, h


@triton.jit
def _tree_reverse_steps(a_rows, g_rows, first: tl.constexpr, n: tl.constexpr):
    if n == 1:
        return a_rows[first], a_rows[first] * g_rows[first]
    else:
        a_early, c_early = _tree_reverse_steps(a_rows, g_rows, first, n // 2)
        a_late, c_late = _tree_reverse_steps(a_rows, g_rows, first + n // 2, n // 2)
        return a_early * a_late, a_early * c_late + c_early


@triton.jit
def reverse_segment_steps(a_rows, g_rows, S: tl.constexpr):
    decay, c = _tree_reverse_steps(a_rows, g_rows, 0, S)
    return decay, c
""",
    "rejoin": """
from samu_kernels.common.tiles import join_from_first_checkpoint


@triton.jit
def entering_from_checkpoints(SAVED, b, tile, seg_a, seg_x, columns, column_mask, R, n_chunks,
                              L, T: tl.constexpr, TILE: tl.constexpr, S: tl.constexpr,
                              SEGMENTS: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
    return join_from_first_checkpoint(SAVED, b, tile, seg_a, seg_x, columns, column_mask, R,
                                      n_chunks, T, TILE, SEGMENTS, BLOCK_R)
""",
}
"""Stand-in Triton functions by ablation name, appended to a copy of split.py (the kernels
resolve their helpers' names when they compile, so the last definition wins)."""

BASELINE = "base"
"""The name of split.py itself, the baseline every ablation is divided by."""

_ABLATION_FOLDER = Path(tempfile.mkdtemp(prefix="samu_ablations_"))


def ablated_split_module(ablation: str) -> ModuleType:
    """split.py with the stand-ins of ``ablation`` (names joined by '+'), loaded from a
    file of its own (Triton reads a kernel's source); :data:`BASELINE` gives split.py."""
    from samu_kernels.common import split  # noqa: PLC0415

    if ablation == BASELINE:
        return split
    source = Path(split.__file__).read_text()
    for name in ablation.split("+"):
        source += "\n" + STAND_INS[name]
    module_name = "split_" + ablation.replace("+", "_")
    path = _ABLATION_FOLDER / f"{module_name}.py"
    path.write_text(source)
    return _load_module(f"samu_kernels.common.{module_name}", path)


def _load_module(name: str, path: Path) -> ModuleType:
    """The module ``name`` executed from the file ``path``."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def launching(module: ModuleType) -> Iterator[None]:
    """The launcher's time-split kernels taken from ``module`` inside the block."""
    from samu_kernels.common import launch  # noqa: PLC0415

    kept = launch.split  # type: ignore[attr-defined]
    launch.split = module  # type: ignore[attr-defined]
    try:
        yield
    finally:
        launch.split = kept  # type: ignore[attr-defined]


def time_ablations(
    shape: tuple[int, int, int], architecture: str, backend: str, ablations: Sequence[str],
    rounds: int,
) -> list[GeometryTiming]:  # fmt: skip
    """Forward + backward device ms of each of ``ablations`` (the first the baseline) in
    ``rounds`` interleaved rounds, and each one's kernels timed one by one (eager, under
    torch.profiler); a timing's ``tile`` is its ablation."""
    import torch  # noqa: PLC0415

    from samu_kernels.benchmark import time_step  # noqa: PLC0415
    from samu_kernels.benchmark_steps import scan_step  # noqa: PLC0415
    from samu_kernels.compare_tiles import (  # noqa: PLC0415
        GeometryTiming,
        interleaved_rounds,
        kernel_times,
        set_medians,
    )

    step, leaves = scan_step(architecture, shape, backend, torch.device("cuda"))
    modules = {ablation: ablated_split_module(ablation) for ablation in ablations}
    for module in modules.values():  # compile each before any timing
        with launching(module):
            step()
    torch.cuda.synchronize()
    timings = {ablation: GeometryTiming(ablation) for ablation in ablations}
    for order in interleaved_rounds(ablations, rounds):
        for ablation in order:
            with launching(modules[ablation]):
                timings[ablation].rounds_ms.append(time_step(step, leaves).device_ms)
    for ablation, timing in timings.items():
        with launching(modules[ablation]):
            timing.kernels_ms = kernel_times(step, leaves)
    set_medians(list(timings.values()))
    return list(timings.values())


def _kernel_ms(kernels: dict[str, float], direction: str) -> float:
    return sum(ms for name, ms in kernels.items() if f"{direction}_split_kernel" in name)


def _parser() -> argparse.ArgumentParser:
    from samu_kernels.benchmark import REFERENCE_SHAPES  # noqa: PLC0415
    from samu_kernels.result_file import add_result_file_options  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--arch", default="samu", choices=("samu", "rglru"))
    parser.add_argument("--backend", help="a time-split backend (default: the arch's default)")
    parser.add_argument(
        "--shape", default="state2560_medium", help=f"B,L,R or one of {', '.join(REFERENCE_SHAPES)}"
    )
    parser.add_argument(
        "--ablation",
        action="append",
        default=[],
        help=f"one of {', '.join(STAND_INS)}, or several joined by '+'; repeat the option",
    )
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    parser.add_argument(
        "--stats",
        action="store_true",
        help="compile for sm_90 on the CPU and print SASS counts instead of timing",
    )
    add_result_file_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; see the module docstring."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    passed_on: list[str] = []
    if "--" in arguments:
        passed_on = arguments[arguments.index("--") + 1 :]
        arguments = arguments[: arguments.index("--")]
    parser = _parser()
    args = parser.parse_args(arguments)
    for ablation in args.ablation:
        unknown = [name for name in ablation.split("+") if name not in STAND_INS]
        if unknown:
            parser.error(f"--ablation {ablation!r}: unknown {unknown}; expected {list(STAND_INS)}")
    if len(set(args.ablation)) != len(args.ablation):
        parser.error(f"--ablation: each ablation once, got {args.ablation}")
    if args.stats:
        check_kernels_compile = _load_module(
            "check_kernels_compile", Path(__file__).resolve().parent / "check_kernels_compile.py"
        )
        status = 0
        for ablation in [BASELINE, *args.ablation]:
            print(f"== {ablation}")
            with launching(ablated_split_module(ablation)):
                status |= check_kernels_compile.main(passed_on)
        return status
    return _time(parser, args)


def _time(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import torch  # noqa: PLC0415

    from samu_kernels.backends import DEFAULT_BACKENDS, check_backend  # noqa: PLC0415
    from samu_kernels.compare_tiles import (  # noqa: PLC0415
        parse_shape,
        refuse_too_few_rounds,
        write_timings,
    )
    from samu_kernels.controllers import default_controller  # noqa: PLC0415
    from samu_kernels.result_file import refuse_unwritable_result_file  # noqa: PLC0415

    if not args.ablation:
        parser.error("--ablation: give at least one to time against the kernels")
    try:
        shape = parse_shape(args.shape)
    except ValueError as error:
        parser.error(f"--shape: {error}")
    backend = args.backend or DEFAULT_BACKENDS[args.arch]
    try:
        check_backend(args.arch, backend, default_controller(args.arch))
    except ValueError as error:
        parser.error(f"--backend: {error}")
    refuse_too_few_rounds(parser, args.rounds)
    refuse_unwritable_result_file(parser, args.out, force=args.force)
    if not torch.cuda.is_available():
        print("timing needs a CUDA GPU (--stats compiles on a CPU)")
        return 2
    ablations = [BASELINE, *args.ablation]
    timings = time_ablations(shape, args.arch, backend, ablations, args.rounds)
    print(f"{args.arch} {backend} {list(shape)} on {torch.cuda.get_device_name()}:")
    print(f"{'ablation':34s} {'ms':>8s} {'x base':>7s} {'forward':>8s} {'backward':>8s} spread")
    for timing in timings:
        print(
            f"{timing.tile:34s} {timing.median_ms:8.4f} {timing.relative:7.3f} "
            f"{_kernel_ms(timing.kernels_ms, 'forward'):8.4f} "
            f"{_kernel_ms(timing.kernels_ms, 'backward'):8.4f} "
            f"{max(timing.rounds_ms) / min(timing.rounds_ms) - 1:6.1%}"
        )
    if args.out is not None:
        write_timings(
            args.out, torch.device("cuda"), args.arch, backend, shape, args.rounds,
            {"ablations": {timing.tile: asdict(timing) for timing in timings}},
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
