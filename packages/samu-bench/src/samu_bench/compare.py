"""Comparing two result files: median ratios with bootstrap confidence intervals."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from samu_bench.plan import RowKey
from samu_bench.roofline import row_floor_ms

Verdict = Literal["faster", "slower", "within noise"]


@dataclass(frozen=True)
class RowComparison:
    """NEW against BASE for one row of one case.

    `ratio` is median(NEW) / median(BASE); `low`, `high` bound its bootstrap confidence
    interval. Below 1 means NEW is faster. The floors are the roofline times on each
    file's GPU (None for an unknown GPU).
    """

    case: str
    key: RowKey
    base_median_ms: float
    new_median_ms: float
    ratio: float
    low: float
    high: float
    verdict: Verdict
    base_floor_ms: float | None
    new_floor_ms: float | None


@dataclass(frozen=True)
class Comparison:
    """Every matched row, the rows found in only one file, and the GPUs of both files."""

    rows: tuple[RowComparison, ...]
    only_in_base: tuple[tuple[str, RowKey], ...]
    only_in_new: tuple[tuple[str, RowKey], ...]
    base_gpu: str | None
    new_gpu: str | None
    confidence: float

    @property
    def gpus_differ(self) -> bool:
        """Whether the files come from different GPUs (or one from a CPU smoke run)."""
        return self.base_gpu != self.new_gpu


def _quantile(ordered: Sequence[float], fraction: float) -> float:
    """Linear-interpolation quantile of an ascending sequence."""
    position = fraction * (len(ordered) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def bootstrap_ratio_interval(
    base_ms: Sequence[float],
    new_ms: Sequence[float],
    *,
    resamples: int,
    confidence: float,
    rng: random.Random,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(new) / median(base).

    Each resample draws both sample lists with replacement and takes the ratio of their
    medians; the interval holds the central `confidence` fraction of those ratios.
    """
    ratios = sorted(
        statistics.median(rng.choices(new_ms, k=len(new_ms)))
        / statistics.median(rng.choices(base_ms, k=len(base_ms)))
        for _ in range(resamples)
    )
    tail = (1.0 - confidence) / 2.0
    return _quantile(ratios, tail), _quantile(ratios, 1.0 - tail)


def verdict(low: float, high: float) -> Verdict:
    """`faster` when the whole interval is below 1, `slower` when above, else within noise."""
    if high < 1.0:
        return "faster"
    if low > 1.0:
        return "slower"
    return "within noise"


Located = tuple[Mapping[str, Any], Mapping[str, Any]]
"""A row of a file together with its case."""


def _rows_by_key(document: Mapping[str, Any]) -> dict[tuple[str, RowKey], Located]:
    return {
        (case["case"], (row["architecture"], row["backend"], row["controller"])): (case, row)
        for case in document["cases"]
        for row in case["rows"]
    }


def compare_results(
    base: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Match rows of two valid result files by case and (architecture, backend, controller).

    Args:
        base, new: parsed, valid result files (e.g. from `load_result_file`).
        resamples: bootstrap resamples per row.
        confidence: coverage of the interval, in (0, 1).
        seed: seeds the resampling, so a comparison is reproducible.

    Raises:
        ValueError: `resamples` < 1 or `confidence` outside (0, 1).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = random.Random(seed)
    base_gpu, new_gpu = base["environment"]["gpu"], new["environment"]["gpu"]
    base_rows, new_rows = _rows_by_key(base), _rows_by_key(new)
    matched = []
    for identity, (new_case, new_row) in new_rows.items():
        if identity not in base_rows:
            continue
        base_case, base_row = base_rows[identity]
        base_ms = base_row["optimizer_step"]["samples_ms"]
        new_ms = new_row["optimizer_step"]["samples_ms"]
        low, high = bootstrap_ratio_interval(
            base_ms, new_ms, resamples=resamples, confidence=confidence, rng=rng
        )
        base_median = float(statistics.median(base_ms))
        new_median = float(statistics.median(new_ms))
        matched.append(
            RowComparison(
                case=identity[0],
                key=identity[1],
                base_median_ms=base_median,
                new_median_ms=new_median,
                ratio=new_median / base_median,
                low=low,
                high=high,
                verdict=verdict(low, high),
                base_floor_ms=row_floor_ms(base_gpu, base_case, base_row),
                new_floor_ms=row_floor_ms(new_gpu, new_case, new_row),
            )
        )
    return Comparison(
        rows=tuple(matched),
        only_in_base=tuple(identity for identity in base_rows if identity not in new_rows),
        only_in_new=tuple(identity for identity in new_rows if identity not in base_rows),
        base_gpu=base_gpu,
        new_gpu=new_gpu,
        confidence=confidence,
    )
