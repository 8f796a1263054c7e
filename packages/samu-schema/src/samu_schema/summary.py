"""The statistics of a row's samples, computed exactly as the validator recomputes them."""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Sequence

from samu_schema.models import OptimizerStep


def mean(samples_ms: Sequence[float]) -> float:
    """Arithmetic mean, from a correctly rounded sum (``math.fsum``)."""
    return math.fsum(samples_ms) / len(samples_ms)


def population_std(samples_ms: Sequence[float]) -> float:
    """Population standard deviation (ddof = 0) around :func:`mean`."""
    center = mean(samples_ms)
    return math.sqrt(math.fsum((sample - center) ** 2 for sample in samples_ms) / len(samples_ms))


def median_absolute_deviation(samples_ms: Sequence[float]) -> float:
    """Median of the absolute deviations from the median, unscaled (no 1.4826 factor)."""
    center = statistics.median(samples_ms)
    return statistics.median([abs(sample - center) for sample in samples_ms])


def expected_statistics(samples_ms: Sequence[float]) -> dict[str, float]:
    """Every statistic field of :class:`OptimizerStep`, keyed by field name, from the samples.

    ``samples_ms`` must be non-empty; values are float64 milliseconds.
    """
    return {
        "median_ms": float(statistics.median(samples_ms)),
        "mean_ms": mean(samples_ms),
        "std_ms": population_std(samples_ms),
        "mad_ms": float(median_absolute_deviation(samples_ms)),
        "minimum_ms": float(min(samples_ms)),
        "maximum_ms": float(max(samples_ms)),
    }


def summarize(samples_ms: Sequence[float]) -> OptimizerStep:
    """Build a row's ``optimizer_step`` from its timed samples.

    Args:
        samples_ms: one or more finite, positive step times in milliseconds (Python or
            NumPy floats or ints; stored as float64).

    Returns:
        An :class:`OptimizerStep` holding the samples in order and their median, mean,
        population standard deviation, unscaled MAD, minimum and maximum, exactly as
        :func:`samu_schema.validate` recomputes them.

    Raises:
        TypeError: ``samples_ms`` is not a sequence of real numbers.
        ValueError: ``samples_ms`` is empty, or a sample is NaN, infinite, zero or negative.
    """
    if isinstance(samples_ms, (str, bytes)) or not isinstance(samples_ms, Sequence):
        raise TypeError(
            f"samples_ms must be a sequence of numbers, found {type(samples_ms).__name__}"
        )
    if not samples_ms:
        raise ValueError("samples_ms must hold at least one sample, found none")
    samples = [_as_sample(index, sample) for index, sample in enumerate(samples_ms)]
    return OptimizerStep(samples_ms=samples, **expected_statistics(samples))


def _as_sample(index: int, sample: object) -> float:
    if isinstance(sample, bool) or not isinstance(sample, numbers.Real):
        raise TypeError(
            f"samples_ms[{index}] must be a real number of milliseconds, "
            f"found {type(sample).__name__}"
        )
    value = float(sample)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(
            f"samples_ms[{index}] must be a finite positive number of milliseconds, found {value!r}"
        )
    return value
