"""Semantic validation: the protocol's rules that relate several fields of a result file."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Final

from samu_schema.models import Environment, OptimizerStep, ResultFile, Row
from samu_schema.problems import Problem, ProblemCode, describe_value
from samu_schema.summary import expected_statistics

RELATIVE_TOLERANCE: Final = 1e-9
"""A statistic may differ from its recomputed value by this fraction of it ..."""
ABSOLUTE_TOLERANCE_PER_MS: Final = 1e-12
"""... or by this fraction of the largest sample (so a zero spread compares sanely)."""

MEMORY_FIELDS: Final = (
    "baseline_allocated_bytes",
    "baseline_reserved_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "peak_allocated_delta_bytes",
    "peak_reserved_delta_bytes",
)
_MEMORY_KINDS: Final = ("allocated", "reserved")
_CPU_FILE: Final = 'a CPU smoke file (environment.device == "cpu")'


def check_rules(result: ResultFile) -> list[Problem]:
    """Every cross-field rule of the protocol, for a structurally valid file, in file order."""
    is_cpu_file = result.environment.device == "cpu"
    problems = list(_check_environment(result.environment, is_cpu_file))
    seen_cases: dict[str, int] = {}
    for case_index, case in enumerate(result.cases):
        case_path = f"cases[{case_index}]"
        if case.case in seen_cases:
            problems.append(
                Problem(
                    ProblemCode.DUPLICATE_CASE,
                    f"{case_path}.case",
                    f"expected a unique case name, found {json.dumps(case.case)} again "
                    f"(first at cases[{seen_cases[case.case]}])",
                )
            )
        seen_cases.setdefault(case.case, case_index)
        seen_rows: dict[tuple[str, str, str | None], int] = {}
        for row_index, row in enumerate(case.rows):
            row_path = f"{case_path}.rows[{row_index}]"
            key = (row.architecture, row.backend, row.controller)
            if key in seen_rows:
                problems.append(
                    Problem(
                        ProblemCode.DUPLICATE_ROW,
                        row_path,
                        "expected a unique (architecture, backend, controller) in the case, found "
                        f"({', '.join(map(json.dumps, key))}) again "
                        f"(first at {case_path}.rows[{seen_rows[key]}])",
                    )
                )
            seen_rows.setdefault(key, row_index)
            problems.extend(_check_statistics(row.optimizer_step, f"{row_path}.optimizer_step"))
            problems.extend(_check_memory(row, row_path, is_cpu_file))
    return problems


def _check_environment(environment: Environment, is_cpu_file: bool) -> Iterator[Problem]:
    if is_cpu_file and environment.gpu is not None:
        yield Problem(
            ProblemCode.VALUE_IN_CPU_FILE,
            "environment.gpu",
            f"expected null in {_CPU_FILE}, found {describe_value(environment.gpu)}",
        )
    if not is_cpu_file:
        for name in ("cuda", "gpu"):
            if getattr(environment, name) is None:
                yield _null_outside_cpu_file(f"environment.{name}", "a non-empty string")


def _check_statistics(step: OptimizerStep, path: str) -> Iterator[Problem]:
    samples = step.samples_ms
    expected_by_name = expected_statistics(samples)
    absolute_tolerance = ABSOLUTE_TOLERANCE_PER_MS * max(samples)
    for name, expected in expected_by_name.items():
        found: float = getattr(step, name)
        if not math.isclose(
            found, expected, rel_tol=RELATIVE_TOLERANCE, abs_tol=absolute_tolerance
        ):
            yield Problem(
                ProblemCode.STATISTIC_MISMATCH,
                f"{path}.{name}",
                f"expected {expected!r} (recomputed from samples_ms), found {found!r}",
            )


def _check_memory(row: Row, path: str, is_cpu_file: bool) -> Iterator[Problem]:
    values = {name: getattr(row, name) for name in MEMORY_FIELDS}
    if is_cpu_file:
        for name, value in values.items():
            if value is not None:
                yield Problem(
                    ProblemCode.VALUE_IN_CPU_FILE,
                    f"{path}.{name}",
                    f"expected null in {_CPU_FILE}, found {describe_value(value)}",
                )
        return
    for name, value in values.items():
        if value is None:
            yield _null_outside_cpu_file(f"{path}.{name}", "a non-negative integer")
    for kind in _MEMORY_KINDS:
        baseline = values[f"baseline_{kind}_bytes"]
        peak = values[f"peak_{kind}_bytes"]
        delta = values[f"peak_{kind}_delta_bytes"]
        if baseline is None or peak is None:
            continue
        if peak < baseline:
            yield Problem(
                ProblemCode.PEAK_BELOW_BASELINE,
                f"{path}.peak_{kind}_bytes",
                f"expected at least baseline_{kind}_bytes = {baseline}, found {peak}",
            )
        if delta is not None and delta != peak - baseline:
            yield Problem(
                ProblemCode.DELTA_MISMATCH,
                f"{path}.peak_{kind}_delta_bytes",
                f"expected peak_{kind}_bytes - baseline_{kind}_bytes = {peak - baseline}, "
                f"found {delta}",
            )


def _null_outside_cpu_file(path: str, expected: str) -> Problem:
    return Problem(
        ProblemCode.NULL_OUTSIDE_CPU_FILE,
        path,
        f"expected {expected}, found null, which is allowed only in {_CPU_FILE}",
    )
