"""summarize: statistics against a float64 NumPy reference, and against the validator."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samu_schema import OptimizerStep, ProblemCode, summarize, validate

REFERENCE: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "h800_pcie_results.json").read_text(encoding="utf-8")
)
STATISTICS = ("median_ms", "mean_ms", "std_ms", "mad_ms", "minimum_ms", "maximum_ms")
sample_lists = st.lists(
    st.floats(min_value=1e-3, max_value=1e5, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=40,
)


def numpy_statistics(samples: list[float]) -> dict[str, float]:
    values = np.asarray(samples, dtype=np.float64)
    median = float(np.median(values))
    return {
        "median_ms": median,
        "mean_ms": float(values.mean()),
        "std_ms": float(values.std(ddof=0)),
        "mad_ms": float(np.median(np.abs(values - median))),
        "minimum_ms": float(values.min()),
        "maximum_ms": float(values.max()),
    }


def with_step(step: OptimizerStep) -> dict[str, Any]:
    """The reference file with cases[1].rows[0].optimizer_step replaced by ``step``."""
    data = copy.deepcopy(REFERENCE)
    data["cases"][1]["rows"][0]["optimizer_step"] = step.model_dump()
    return data


def test_summarize_matches_the_reference_file_exactly() -> None:
    for case in REFERENCE["cases"]:
        for row in case["rows"]:
            step = row["optimizer_step"]
            assert summarize(step["samples_ms"]).model_dump() == step


@settings(max_examples=200, deadline=None)
@given(samples=sample_lists)
def test_summarize_agrees_with_numpy_in_float64(samples: list[float]) -> None:
    step = summarize(samples)
    assert step.samples_ms == samples
    expected = np.asarray(list(numpy_statistics(samples).values()))
    found = np.asarray([getattr(step, name) for name in STATISTICS])
    assert np.linalg.norm(found - expected) / np.linalg.norm(expected) < 1e-13


@settings(max_examples=100, deadline=None)
@given(samples=sample_lists)
def test_rows_built_by_summarize_validate(samples: list[float]) -> None:
    assert validate(with_step(summarize(samples))).problems == []


@settings(max_examples=150, deadline=None)
@given(
    samples=sample_lists,
    name=st.sampled_from(STATISTICS),
    fraction=st.floats(min_value=1e-6, max_value=1.0),
)
def test_perturbing_one_statistic_fails_validation(
    samples: list[float], name: str, fraction: float
) -> None:
    step = summarize(samples)
    perturbed = step.model_copy(update={name: getattr(step, name) + fraction * max(samples)})
    problems = validate(with_step(perturbed)).problems
    assert [(problem.code, problem.path) for problem in problems] == [
        (ProblemCode.STATISTIC_MISMATCH, f"cases[1].rows[0].optimizer_step.{name}")
    ]


def test_identical_samples_have_zero_spread() -> None:
    step = summarize([7.25] * 5)
    assert (step.std_ms, step.mad_ms, step.median_ms, step.mean_ms) == (0.0, 0.0, 7.25, 7.25)


def test_even_count_median_and_mad_average_the_middle_pair() -> None:
    step = summarize([4.0, 1.0, 3.0, 2.0])
    assert (step.median_ms, step.mad_ms, step.std_ms) == (2.5, 1.0, math.sqrt(1.25))


def test_numpy_and_integer_samples_become_floats() -> None:
    samples: list[Any] = [np.float32(2.0), np.float64(3.0), np.int64(4), 5]
    step = summarize(samples)
    assert step.samples_ms == [2.0, 3.0, 4.0, 5.0]
    assert all(type(sample) is float for sample in step.samples_ms)


@pytest.mark.parametrize(
    ("samples", "error", "fragment"),
    [
        ([], ValueError, "at least one sample"),
        ([1.0, float("nan")], ValueError, "samples_ms[1] must be a finite positive"),
        ([float("inf")], ValueError, "samples_ms[0] must be a finite positive"),
        ([1.0, 0.0], ValueError, "found 0.0"),
        ([-2.0], ValueError, "found -2.0"),
        ([1.0, "2.0"], TypeError, "samples_ms[1] must be a real number of milliseconds"),
        ([True], TypeError, "found bool"),
        ("12", TypeError, "samples_ms must be a sequence of numbers, found str"),
        (3.0, TypeError, "found float"),
    ],
)
def test_summarize_rejects_bad_samples(samples: Any, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error) as raised:
        summarize(samples)
    assert fragment in str(raised.value)
