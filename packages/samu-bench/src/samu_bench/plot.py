"""Plot of the sample distribution per row and case (needs the `plot` extra)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samu_bench.errors import BenchError
from samu_bench.views import environment_line, file_row_label


def plot_samples(document: Mapping[str, Any], out: Path) -> None:
    """Draw one panel per case: each row's samples (ms), range and median; save as `out`.

    Raises:
        BenchError: matplotlib is not installed, or `out` cannot be written.
    """
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415  # optional `plot` extra
    except ImportError as error:
        raise BenchError(
            "plotting needs matplotlib; install it with: pip install 'samu-bench[plot]'"
        ) from error
    cases = document["cases"]
    heights = [1.2 + 0.6 * len(case["rows"]) for case in cases]
    figure = Figure(figsize=(10, sum(heights) + 0.6), layout="constrained")
    figure.suptitle(environment_line(document), fontsize=9)
    axes = figure.subplots(len(cases), 1, squeeze=False, height_ratios=heights)[:, 0]
    for axis, case in zip(axes, cases, strict=True):
        rows = case["rows"]
        positions = list(range(len(rows)))
        for position, row in zip(positions, rows, strict=True):
            step = row["optimizer_step"]
            axis.hlines(position, step["minimum_ms"], step["maximum_ms"], color="0.6")
            values = step["samples_ms"]
            axis.plot(values, [position] * len(values), "o", alpha=0.5, markersize=3)
            axis.plot([step["median_ms"]], [position], "|", color="black", markersize=16)
        axis.set_ylim(-0.6, len(rows) - 0.4)
        axis.set_yticks(positions, [file_row_label(row) for row in rows], fontsize=7)
        axis.set_title(f"{case['case']} (B={case['batch']}, L={case['length']})", fontsize=9)
        axis.set_xlabel("training step (ms)")
    try:
        figure.savefig(out, dpi=120)
    except OSError as error:
        raise BenchError(f"cannot write {out}: {error.strerror or error}") from error
