"""`samu-bench profile`: each row's step broken down by kernel category, as tables and JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from samu_bench.breakdown import CATEGORIES, StepBreakdown, step_breakdown
from samu_bench.environment import collect_environment
from samu_bench.protocol import ResidentRow, attributed_to
from samu_bench.run_command import check_writable, resolve_invocation

TOP_NAME_WIDTH = 90
"""Kernel names longer than this are cut in the tables (the JSON keeps them whole)."""


def breakdown_table(case: str, breakdowns: list[StepBreakdown]) -> Table:
    """One line per row: step and kernel time, busy share, ms per category (used ones)."""
    used = [
        category
        for category in CATEGORIES
        if any(breakdown.categories[category] > 0 for breakdown in breakdowns)
    ]
    table = Table(title=f"{case}: ms per step by kernel category", title_justify="left")
    for header in ("row", "step ms", "kernel ms", "busy", *used):
        table.add_column(header, justify="left" if header == "row" else "right")
    for breakdown in breakdowns:
        table.add_row(
            breakdown.row,
            f"{breakdown.step_ms:.3f}",
            f"{breakdown.kernel_ms:.3f}",
            "-" if breakdown.busy is None else f"{breakdown.busy:.0%}",
            *(f"{breakdown.categories[category]:.3f}" for category in used),
        )
    return table


def kernels_table(breakdown: StepBreakdown, count: int) -> Table:
    """The `count` longest kernels (ops) of a row's step."""
    table = Table(title=f"{breakdown.row}: top {count} kernels", title_justify="left")
    for header in ("kernel", "category", "calls/step", "ms/step", "of kernel time"):
        table.add_column(header, justify="left" if header in ("kernel", "category") else "right")
    for kernel in breakdown.kernels[:count]:
        name = kernel.name
        if len(name) > TOP_NAME_WIDTH:
            name = name[: TOP_NAME_WIDTH - 1] + "…"
        share = kernel.ms_per_step / breakdown.kernel_ms
        table.add_row(
            name,
            kernel.category,
            f"{kernel.calls_per_step:g}",
            f"{kernel.ms_per_step:.3f}",
            f"{share:.1%}",
        )
    return table


def profile_command(args: argparse.Namespace, console: Console, messages: Console) -> int:
    """Execute `samu-bench profile`; tables go to `console`, notices to `messages`."""
    invocation = resolve_invocation(args, messages)
    device, settings = invocation.device, invocation.settings
    out: Path | None = args.out
    if out is not None:
        check_writable(out, force=args.force)
    if device.type != "cuda":
        messages.print(
            "no CUDA GPU: a CPU smoke profile of PyTorch ops by self CPU time (summed over "
            "threads, slowed by the profiler), not kernels",
            style="yellow",
        )
    cases = []
    for plan in invocation.plans:
        torch.compiler.reset()
        breakdowns = []
        for row in plan.rows:
            messages.print(f"profiling {plan.case.name} / {row.label}")
            with attributed_to(plan.case, row):
                resident = ResidentRow(plan.case, row, device, settings.seed)
                breakdowns.append(
                    step_breakdown(resident, device, warmup=settings.warmup, steps=args.steps)
                )
            del resident
        console.print(breakdown_table(plan.case.name, breakdowns))
        for breakdown in breakdowns:
            console.print(kernels_table(breakdown, args.top))
        cases.append(
            {"case": plan.case.name, "rows": [breakdown.entry() for breakdown in breakdowns]}
        )
    if out is not None:
        document = {
            "environment": collect_environment(device),
            "warmup_steps": settings.warmup,
            "profiled_steps": args.steps,
            "cases": cases,
        }
        out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        messages.print(f"wrote {out}")
    return 0
