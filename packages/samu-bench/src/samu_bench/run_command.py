"""`samu-bench run`: resolve cases and rows, time them, write the file case by case."""

from __future__ import annotations

import argparse
import dataclasses
from datetime import datetime, timezone
from pathlib import Path

import torch
from rich.console import Console

from samu_bench.catalog import (
    CPU_SMOKE,
    REFERENCE_TOKENS,
    builtin_case,
    default_rows,
    is_reference_case,
    needs_cuda,
    parse_row,
)
from samu_bench.config import SIZE_KEYS, load_config
from samu_bench.environment import collect_environment
from samu_bench.errors import BenchError
from samu_bench.instruments import timer_for
from samu_bench.peers import PeerStatus, is_scan_peer, register_scan_peers, with_peer_rows
from samu_bench.plan import CasePlan, ProtocolSettings
from samu_bench.progress import RunProgress
from samu_bench.protocol import measure_case
from samu_bench.results import ResultWriter
from samu_bench.views import result_notes, result_tables

EXIT_INTERRUPTED = 130
CPU_SMOKE_NOTICE = (
    "CPU smoke run: no CUDA GPU is available, so this times the PyTorch reference backend "
    "on tiny sizes with time.perf_counter. It checks the pipeline; it is not a performance "
    "measurement."
)


def _case_plans_from_options(args: argparse.Namespace, *, on_cuda: bool) -> tuple[CasePlan, ...]:
    """Cases from --case, size options (one custom case), --row and the variant flags.

    --compile adds every row under `torch.compile` (`+compile`); --cuda-graphs adds it
    compiled and replayed from CUDA graphs (`+compile+cudagraphs`); --step-graphs adds it
    compiled with the whole step replayed as one CUDA graph (`+compile+stepgraph`).
    """
    names: list[str] = args.case or (list(REFERENCE_TOKENS) if on_cuda else [CPU_SMOKE.name])
    sizes = {key: getattr(args, key) for key in SIZE_KEYS if getattr(args, key) is not None}
    cases = [builtin_case(name) for name in names]
    if sizes or args.name is not None:
        if len(cases) != 1:
            raise BenchError(
                f"size options and --name change one case; give exactly one --case "
                f"(got {len(cases)})"
            )
        cases = [dataclasses.replace(cases[0], name=args.name or "custom", **sizes)]
    plans = []
    for base_name, case in zip(names, cases, strict=True):
        if args.row:
            rows = tuple(parse_row(text) for text in args.row)
        else:
            rows = default_rows(base_name, on_cuda=on_cuda)
        variants = rows
        if args.compile:
            variants += tuple(dataclasses.replace(row, compiled=True) for row in rows)
        if args.cuda_graphs:
            variants += tuple(
                dataclasses.replace(row, compiled=True, cuda_graphs=True) for row in rows
            )
        if args.step_graphs:
            variants += tuple(
                dataclasses.replace(row, compiled=True, step_graph=True) for row in rows
            )
        plans.append(CasePlan(case, variants))
    return tuple(plans)


def resolve_plan(
    args: argparse.Namespace, *, on_cuda: bool
) -> tuple[tuple[CasePlan, ...], ProtocolSettings]:
    """The cases with rows and the sampling settings a `run` invocation asks for.

    `--config` gives cases and rows (not combinable with --case, --row, --compile,
    --cuda-graphs, --step-graphs, sizes or --name); --samples, --warmup and --seed
    override the file's values.
    """
    if args.config is None:
        plans = _case_plans_from_options(args, on_cuda=on_cuda)
        from_file: dict[str, int | None] = {}
    else:
        cli_case_options = [
            args.case,
            args.row,
            args.compile,
            args.cuda_graphs,
            args.step_graphs,
            args.name,
        ] + [getattr(args, key) for key in SIZE_KEYS]
        if any(option not in (None, [], False) for option in cli_case_options):
            raise BenchError(
                "--config gives the cases and rows; do not combine it with --case, --row, "
                "--compile, --cuda-graphs, --step-graphs, --name or size options"
            )
        file_config = load_config(args.config, on_cuda=on_cuda)
        plans = file_config.cases
        from_file = {
            "samples": file_config.samples,
            "warmup": file_config.warmup,
            "seed": file_config.seed,
        }
    chosen: dict[str, int] = {}
    for key in ("samples", "warmup", "seed"):
        value = getattr(args, key)
        value = from_file.get(key) if value is None else value
        if value is not None:
            chosen[key] = value
    return plans, ProtocolSettings(**chosen)


def check_device(plans: tuple[CasePlan, ...], *, on_cuda: bool) -> None:
    """Refuse what needs a GPU on a machine without CUDA (BenchError naming it)."""
    if on_cuda:
        return
    for plan in plans:
        if is_reference_case(plan.case.name):
            raise BenchError(
                f"case {plan.case.name!r} needs a CUDA GPU and none is available; "
                f"without one, run the {CPU_SMOKE.name!r} case"
            )
        for row in plan.rows:
            if row.replays_graphs:
                flag = "--cuda-graphs (cuda_graphs)"
                if row.step_graph:
                    flag = "--step-graphs (step_graph)"
                raise BenchError(
                    f"case {plan.case.name!r}, row {row.label}: CUDA graphs need a CUDA GPU "
                    f"and none is available; drop {flag} on a CPU"
                )
            if needs_cuda(row):
                raise BenchError(
                    f"case {plan.case.name!r}, row {row.label}: backend {row.backend!r} needs "
                    "a CUDA GPU and none is available; use backend 'reference' on a CPU"
                )


def add_peers(
    plans: tuple[CasePlan, ...], args: argparse.Namespace, messages: Console, *, on_cuda: bool
) -> tuple[tuple[CasePlan, ...], dict[str, PeerStatus]]:
    """Register the scan peers when asked for (--peers or a peer --row) and add peer rows.

    With --peers every case gets every peer's row (compiled too with --compile); a peer
    that cannot run is said in one line and recorded in the case's `skipped_rows`.

    Returns:
        The plans and the status of every peer (empty when no peer was asked for).

    Raises:
        BenchError: a --row or config row names a scan peer that is not installed.
    """
    wanted = {row.backend for plan in plans for row in plan.rows if is_scan_peer(row.backend)}
    if not (args.peers or wanted):
        return plans, {}
    statuses = register_scan_peers()
    for backend in sorted(wanted):
        if not statuses[backend].available:
            raise BenchError(f"row backend {backend}: {statuses[backend].reason}")
    if not args.peers:
        return plans, statuses
    for status in statuses.values():
        if not status.available:
            messages.print(status.message, style="yellow")
    extended = tuple(
        with_peer_rows(plan, statuses, compiled=args.compile, on_cuda=on_cuda) for plan in plans
    )
    return extended, statuses


def default_output_path(device: torch.device) -> Path:
    """`samu-bench-<device>-<UTC time>.json` in the working directory."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path(f"samu-bench-{device.type}-{stamp}.json")


@dataclasses.dataclass(frozen=True)
class Invocation:
    """What a `run` or `profile` command line asks for, resolved on this machine."""

    device: torch.device
    plans: tuple[CasePlan, ...]
    settings: ProtocolSettings
    peer_statuses: dict[str, PeerStatus]


def resolve_invocation(args: argparse.Namespace, messages: Console) -> Invocation:
    """The device (the current CUDA GPU, else the CPU), cases, rows and settings of `args`.

    Raises:
        BenchError: the options are inconsistent, or a row cannot run on this machine.
    """
    on_cuda = torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if on_cuda else torch.device("cpu")
    plans, settings = resolve_plan(args, on_cuda=on_cuda)
    plans, peer_statuses = add_peers(plans, args, messages, on_cuda=on_cuda)
    check_device(plans, on_cuda=on_cuda)
    return Invocation(device, plans, settings, peer_statuses)


def check_writable(out: Path, *, force: bool) -> None:
    """Refuse to overwrite `out` without `force`, or to write into a missing directory."""
    if out.exists() and not force:
        raise BenchError(f"{out} exists; pass --force to overwrite it")
    if not out.parent.is_dir():
        raise BenchError(f"cannot write {out}: directory {out.parent} does not exist")


def run_command(args: argparse.Namespace, console: Console, messages: Console) -> int:
    """Execute `samu-bench run`; tables go to `console`, notices and progress to `messages`."""
    invocation = resolve_invocation(args, messages)
    device, plans, settings = invocation.device, invocation.plans, invocation.settings
    peer_statuses = invocation.peer_statuses
    on_cuda = device.type == "cuda"
    out: Path = args.out or default_output_path(device)
    check_writable(out, force=args.force)
    if not on_cuda:
        messages.print(CPU_SMOKE_NOTICE, style="yellow")
    environment = collect_environment(device)
    if peer_statuses:
        environment["peers"] = {
            status.distribution: status.version for status in peer_statuses.values()
        }
    writer = ResultWriter(
        out,
        environment,
        settings,
        timer_for(device).name,
        overwrite=args.force,
    )
    try:
        with RunProgress(plans, settings, messages) as progress:
            for plan in plans:
                writer.add_case(measure_case(plan, settings, device, progress))
                progress.case_finished()
    except KeyboardInterrupt:
        if writer.cases:
            messages.print(
                f"interrupted: kept the {len(writer.cases)} finished case(s) of {len(plans)} "
                f"in {out}"
            )
        else:
            messages.print("interrupted before the first case finished; nothing was written")
        return EXIT_INTERRUPTED
    if writer.document is not None:
        for table in result_tables(writer.document):
            console.print(table)
        for note in result_notes(writer.document):
            console.print(note)
    messages.print(f"wrote {out}")
    return 0
