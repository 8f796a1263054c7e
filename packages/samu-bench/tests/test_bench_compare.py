"""Comparing result files: verdicts on synthetic data, matching, GPUs, determinism."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from samu_bench import compare_results
from samu_bench.compare import bootstrap_ratio_interval, verdict


def scaled(document: dict[str, Any], factor: float, noise: float, seed: int) -> dict[str, Any]:
    """A copy with every sample scaled by `factor` and multiplied by 1 +- `noise`."""
    rng = random.Random(seed)
    result = copy.deepcopy(document)
    for case in result["cases"]:
        for row in case["rows"]:
            samples = row["optimizer_step"]["samples_ms"]
            row["optimizer_step"]["samples_ms"] = [
                sample * factor * (1 + rng.uniform(-noise, noise)) for sample in samples
            ]
    return result


@pytest.mark.parametrize(
    ("factor", "expected"), [(0.8, "faster"), (1.25, "slower"), (1.0, "within noise")]
)
def test_verdicts_on_synthetic_data(
    reference_document: dict[str, Any], factor: float, expected: str
) -> None:
    new = scaled(reference_document, factor, noise=0.002, seed=1)
    comparison = compare_results(reference_document, new, resamples=2000)
    assert len(comparison.rows) == 6
    for row in comparison.rows:
        assert row.verdict == expected
        assert row.low <= row.ratio <= row.high
        assert row.ratio == pytest.approx(factor, rel=0.01)
    assert not comparison.gpus_differ
    assert comparison.only_in_base == comparison.only_in_new == ()


def test_noisy_small_difference_is_within_noise() -> None:
    rng = random.Random(3)
    base = [10 + rng.gauss(0, 1) for _ in range(10)]
    new = [10.1 + rng.gauss(0, 1) for _ in range(10)]
    low, high = bootstrap_ratio_interval(
        base, new, resamples=4000, confidence=0.95, rng=random.Random(0)
    )
    assert low < 1 < high
    assert verdict(low, high) == "within noise"


def test_comparison_is_seeded(reference_document: dict[str, Any]) -> None:
    new = scaled(reference_document, 1.0, noise=0.01, seed=2)
    first = compare_results(reference_document, new, resamples=500, seed=5)
    again = compare_results(reference_document, new, resamples=500, seed=5)
    other = compare_results(reference_document, new, resamples=500, seed=6)
    assert first == again
    assert first != other


def test_rows_in_one_file_only_and_gpu_change(reference_document: dict[str, Any]) -> None:
    new = copy.deepcopy(reference_document)
    new["environment"]["gpu"] = "NVIDIA H200"
    removed = new["cases"][0]["rows"].pop(1)
    new["cases"][1]["rows"][0]["backend"] = "reference"
    comparison = compare_results(reference_document, new, resamples=100)
    assert comparison.gpus_differ
    assert len(comparison.rows) == 4
    removed_key = (removed["architecture"], removed["backend"], removed["controller"])
    assert comparison.only_in_base == (
        ("state2048_short", removed_key),
        ("state2560_medium", ("rglru", "fused_grouped_prefix32_hierarchical_chunk16", None)),
    )
    assert comparison.only_in_new == (("state2560_medium", ("rglru", "reference", None)),)
    assert all(row.base_floor_ms is not None for row in comparison.rows)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"resamples": 0}, "resamples"), ({"confidence": 1.0}, "confidence")],
)
def test_bad_comparison_options(
    reference_document: dict[str, Any], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        compare_results(reference_document, reference_document, **options)
