"""Rich tables of result files and comparisons."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from samu_bench.compare import Comparison
from samu_bench.plan import row_label
from samu_bench.roofline import row_floor_ms

_MIB = 1024 * 1024


def environment_line(document: Mapping[str, Any]) -> str:
    """One line naming the device, torch, CUDA and (when recorded) triton and git revision."""
    environment = document["environment"]
    device = environment.get("gpu") or "CPU smoke run (no GPU)"
    parts = [device, f"torch {environment['torch']}"]
    for key, label in (("cuda", "CUDA"), ("triton", "triton"), ("driver", "driver")):
        if environment.get(key):
            parts.append(f"{label} {environment[key]}")
    if environment.get("git_revision"):
        parts.append(f"git {environment['git_revision'][:12]}")
    return " · ".join(parts)


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / _MIB:,.0f}"


def _percent_of_floor(floor_ms: float | None, median_ms: float) -> str:
    return "-" if floor_ms is None else f"{100.0 * floor_ms / median_ms:.1f}%"


def file_row_label(row: Mapping[str, Any]) -> str:
    """`architecture:backend[:controller]` of a result-file row."""
    return row_label((row["architecture"], row["backend"], row["controller"]))


def case_table(case: Mapping[str, Any], gpu: str | None) -> Table:
    """A case's rows: statistics (ms), peak memory deltas (MiB), parameters, roofline floor."""
    config = case["config"]
    table = Table(
        title=(
            f"{case['case']}: B={case['batch']} L={case['length']} D={config['width']} "
            f"R={config['rnn_width']} depth={config['depth']}"
        ),
        title_justify="left",
    )
    table.add_column("row", overflow="fold")
    for heading in ("median ms", "mean", "std", "MAD", "min", "max", "n"):
        table.add_column(heading, justify="right")
    for heading in ("Δ alloc MiB", "Δ resv MiB", "params", "floor ms", "% of floor"):
        table.add_column(heading, justify="right")
    for row in case["rows"]:
        step = row["optimizer_step"]
        floor_ms = row_floor_ms(gpu, case, row)
        table.add_row(
            file_row_label(row),
            f"{step['median_ms']:.3f}",
            f"{step['mean_ms']:.3f}",
            f"{step['std_ms']:.3f}",
            f"{step['mad_ms']:.3f}",
            f"{step['minimum_ms']:.3f}",
            f"{step['maximum_ms']:.3f}",
            str(len(step["samples_ms"])),
            _mib(row["peak_allocated_delta_bytes"]),
            _mib(row["peak_reserved_delta_bytes"]),
            f"{row['parameters']:,}",
            "-" if floor_ms is None else f"{floor_ms:.3f}",
            _percent_of_floor(floor_ms, step["median_ms"]),
        )
    return table


def result_notes(document: Mapping[str, Any]) -> list[str]:
    """Lines to print under a file's tables: rows with fewer samples, and skipped rows."""
    notes = []
    for case in document["cases"]:
        for row in case["rows"]:
            if "sample_limit_reason" in row:
                taken = len(row["optimizer_step"]["samples_ms"])
                notes.append(
                    f"{case['case']} / {file_row_label(row)}: {taken} of "
                    f"{row.get('samples_requested', '?')} samples: {row['sample_limit_reason']}"
                )
        for row in case.get("skipped_rows", []):
            notes.append(f"{case['case']} / {file_row_label(row)} skipped: {row['reason']}")
    return notes


def result_tables(document: Mapping[str, Any]) -> list[Table]:
    """One table per case of a result file."""
    gpu = document["environment"]["gpu"]
    return [case_table(case, gpu) for case in document["cases"]]


_VERDICT_STYLES = {"faster": "green", "slower": "red", "within noise": "dim"}


def comparison_table(comparison: Comparison) -> Table:
    """Per case and row: medians, NEW/BASE ratio with its interval, verdict, % of floor."""
    percent = round(100 * comparison.confidence)
    table = Table(title="NEW / BASE (median step time)", title_justify="left")
    table.add_column("case")
    table.add_column("row", overflow="fold")
    for heading in ("base ms", "new ms", "ratio", f"{percent}% CI", "verdict"):
        table.add_column(heading, justify="right")
    table.add_column("base % of floor", justify="right")
    table.add_column("new % of floor", justify="right")
    for row in comparison.rows:
        style = _VERDICT_STYLES[row.verdict]
        table.add_row(
            row.case,
            row_label(row.key),
            f"{row.base_median_ms:.3f}",
            f"{row.new_median_ms:.3f}",
            f"{row.ratio:.3f}",
            f"[{row.low:.3f}, {row.high:.3f}]",
            f"[{style}]{row.verdict}[/{style}]",
            _percent_of_floor(row.base_floor_ms, row.base_median_ms),
            _percent_of_floor(row.new_floor_ms, row.new_median_ms),
        )
    return table


def comparison_notes(comparison: Comparison, base_name: str, new_name: str) -> list[str]:
    """Lines to print under the table: differing GPUs, rows found in only one file."""
    notes = []
    if comparison.gpus_differ:
        notes.append(
            f"The GPUs differ: BASE ran on {comparison.base_gpu or 'CPU'}, NEW on "
            f"{comparison.new_gpu or 'CPU'}; ratios mix hardware and code changes."
        )
    for name, identities in (
        (base_name, comparison.only_in_base),
        (new_name, comparison.only_in_new),
    ):
        for case, key in identities:
            notes.append(f"only in {name}: {case} / {row_label(key)}")
    if not comparison.rows:
        notes.append("No row is in both files.")
    return notes
