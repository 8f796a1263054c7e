"""The `samu-bench` command: run, profile, show, compare, plot.

Exit status: 0 success, 1 a failure (unreadable or invalid file, failed run), 2 bad
arguments, 130 a run interrupted with Ctrl-C (finished cases are kept in the file).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from rich.console import Console

from samu_bench.catalog import builtin_cases
from samu_bench.compare import compare_results
from samu_bench.errors import BenchError, first_line
from samu_bench.plot import plot_samples
from samu_bench.profile_command import profile_command
from samu_bench.results import load_result_file
from samu_bench.run_command import run_command
from samu_bench.views import (
    comparison_notes,
    comparison_table,
    environment_line,
    result_notes,
    result_tables,
)

EXIT_FAILURE = 1
EXIT_USAGE = 2
_PIPED_WIDTH = 250


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, without the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _warmup(text: str) -> int:
    value = _positive(text)
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"warm-up needs at least 2 steps (optimizer states, compilation), got {value}"
        )
    return value


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {value}")
    return value


def _add_case_options(command: argparse.ArgumentParser, verb: str) -> None:
    """The options that choose cases and rows (shared by `run` and `profile`)."""
    command.add_argument(
        "--case",
        action="append",
        choices=list(builtin_cases()),
        help="built-in case (repeatable; default: the three reference cases, cpu_smoke on CPU)",
    )
    command.add_argument("--warmup", type=_warmup, help="untimed steps per row (default 3, min 2)")
    command.add_argument(
        "--seed", type=int, help="seed of weights, inputs and gradients (default 0)"
    )
    command.add_argument(
        "--row",
        action="append",
        metavar="ARCH:BACKEND[:CONTROLLER]",
        help=f"row to {verb} instead of the case's defaults (repeatable)",
    )
    command.add_argument(
        "--compile",
        action="store_true",
        help=f"also {verb} every row under torch.compile (backend '<backend>+compile')",
    )
    command.add_argument(
        "--cuda-graphs",
        action="store_true",
        help=(
            f"also {verb} every row (not the --peers rows) compiled with "
            "mode='reduce-overhead', replayed from CUDA graphs (backend "
            "'<backend>+compile+cudagraphs')"
        ),
    )
    command.add_argument(
        "--step-graphs",
        action="store_true",
        help=(
            f"also {verb} every row (not the --peers rows) compiled, with its whole step "
            "(forward, backward, capturable fused AdamW) captured as one CUDA graph and "
            "replayed (backend '<backend>+compile+stepgraph')"
        ),
    )
    command.add_argument(
        "--peers",
        action="store_true",
        help=(
            "add the public alternatives (fla-core, accelerated-scan, recurrentgemma; "
            "samu-bench[peers]) to every case, compiled too with --compile"
        ),
    )
    sizes = command.add_argument_group(
        "custom case", "change the sizes of one --case and record it under --name"
    )
    for flag in ("--batch", "--length", "--width", "--rnn-width", "--depth"):
        sizes.add_argument(flag, type=_positive, metavar="N")
    sizes.add_argument("--name", help="name of the custom case (default 'custom')")
    command.add_argument("--config", type=Path, metavar="FILE", help="TOML file of cases and rows")
    command.add_argument("--force", action="store_true", help="overwrite an existing --out file")


def _add_run(commands: argparse._SubParsersAction[_Parser]) -> None:
    run = commands.add_parser(
        "run",
        help="time the training step of every row of the chosen cases and write a result file",
        description=(
            "Time cases by the protocol (docs/benchmarking.md). Without CUDA this is a CPU "
            "smoke run of the 'cpu_smoke' case."
        ),
    )
    run.add_argument("--samples", type=_positive, help="timed samples per row (default 10)")
    _add_case_options(run, "time")
    run.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="result file (default samu-bench-<device>-<UTC time>.json; never overwritten)",
    )


def _add_profile(commands: argparse._SubParsersAction[_Parser]) -> None:
    profile = commands.add_parser(
        "profile",
        help="break every row's step down by kernel category (torch.profiler)",
        description=(
            "Warm each row up, time --steps steps, then profile as many: kernel time per step "
            "by category (matmul, scan, compiled fusion, optimizer, ...) and the longest "
            "kernels. Rows run one at a time. Without CUDA: PyTorch ops by self CPU time."
        ),
    )
    _add_case_options(profile, "profile")
    profile.add_argument(
        "--steps", type=_positive, default=5, help="timed, then profiled, steps (default 5)"
    )
    profile.add_argument(
        "--top", type=_positive, default=10, help="longest kernels listed per row (default 10)"
    )
    profile.add_argument(
        "--out", type=Path, metavar="FILE", help="also write the breakdowns as JSON"
    )
    profile.set_defaults(samples=None)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `samu-bench` with its five subcommands."""
    parser = _Parser(prog="samu-bench", description="Training-step benchmarks of samu blocks.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(commands)
    _add_profile(commands)
    show = commands.add_parser("show", help="print a result file as tables")
    show.add_argument("file", type=Path, metavar="FILE")
    compare = commands.add_parser(
        "compare", help="median ratio NEW/BASE per case and row, with a bootstrap interval"
    )
    compare.add_argument("base", type=Path, metavar="BASE")
    compare.add_argument("new", type=Path, metavar="NEW")
    compare.add_argument("--resamples", type=_positive, default=10_000)
    compare.add_argument("--confidence", type=_confidence, default=0.95)
    compare.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    plot = commands.add_parser("plot", help="plot the sample distribution of every row")
    plot.add_argument("file", type=Path, metavar="FILE")
    plot.add_argument("-o", "--out", type=Path, required=True, metavar="PNG")
    return parser


def _show(file: Path, console: Console) -> int:
    document = load_result_file(file)
    console.print(environment_line(document))
    for table in result_tables(document):
        console.print(table)
    for note in result_notes(document):
        console.print(note)
    return 0


def _compare(args: argparse.Namespace, console: Console) -> int:
    base, new = load_result_file(args.base), load_result_file(args.new)
    comparison = compare_results(
        base, new, resamples=args.resamples, confidence=args.confidence, seed=args.seed
    )
    console.print(f"BASE {args.base}: {environment_line(base)}")
    console.print(f"NEW  {args.new}: {environment_line(new)}")
    if comparison.rows:
        console.print(comparison_table(comparison))
    for note in comparison_notes(comparison, str(args.base), str(args.new)):
        console.print(note)
    return 0


def _plot(args: argparse.Namespace, messages: Console) -> int:
    plot_samples(load_result_file(args.file), args.out)
    messages.print(f"wrote {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run `samu-bench` with `argv` (default: the process arguments); return the exit status.

    Errors are printed as one line on stderr, never as a traceback.
    """
    args = build_parser().parse_args(argv)
    console = Console()
    if not console.is_terminal:  # piped or captured: keep table rows whole, unwrapped
        console = Console(width=_PIPED_WIDTH)
    # Messages and errors stay one line each, their paths whole, when stderr is piped.
    messages = Console(stderr=True, soft_wrap=True)
    try:
        if args.command == "run":
            return run_command(args, console, messages)
        if args.command == "profile":
            return profile_command(args, console, messages)
        if args.command == "show":
            return _show(args.file, console)
        if args.command == "compare":
            return _compare(args, console)
        return _plot(args, messages)
    except BenchError as error:
        print(f"samu-bench: error: {error}", file=sys.stderr)
    except Exception as error:  # the CLI's promise: one line, never a traceback
        message = first_line(str(error)) or "no message"
        print(f"samu-bench: error: {type(error).__name__}: {message}", file=sys.stderr)
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
