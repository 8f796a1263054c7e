"""Broken variants of the reference file: each is rejected with the right code, path, message."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import pytest

from samu_schema import ProblemCode, validate
from samu_schema.validation import validate_json_data

Mutation = Callable[[dict[str, Any]], None]
ROW = ("cases", 0, "rows", 1)
STEP = (*ROW, "optimizer_step")


def _parent(data: Any, location: tuple[str | int, ...]) -> Any:
    for part in location[:-1]:
        data = data[part]
    return data


def assign(location: tuple[str | int, ...], value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        _parent(data, location)[location[-1]] = value

    return mutate


def delete(location: tuple[str | int, ...]) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        del _parent(data, location)[location[-1]]

    return mutate


def recompute(field: str, compute: Callable[[list[float]], float]) -> Mutation:
    """Set a statistic of cases[0].rows[1] to a plausible but wrong formula's value."""

    def mutate(data: dict[str, Any]) -> None:
        step = _parent(data, (*STEP, field))
        step[field] = compute(step["samples_ms"])

    return mutate


def peak_below_baseline(data: dict[str, Any]) -> None:
    row = _parent(data, (*ROW, "parameters"))
    row["peak_reserved_bytes"] = row["baseline_reserved_bytes"] - 1
    row["peak_reserved_delta_bytes"] = 0


def duplicate_case_name(data: dict[str, Any]) -> None:
    data["cases"][2]["case"] = data["cases"][0]["case"]


def duplicate_row(data: dict[str, Any]) -> None:
    rows = data["cases"][0]["rows"]
    rows[1].update(
        architecture=rows[0]["architecture"],
        backend=rows[0]["backend"],
        controller=rows[0]["controller"],
    )


def cpu_file_with(location: tuple[str | int, ...], value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        data["environment"].update(device="cpu", gpu=None, cuda=None)
        for case in data["cases"]:
            for row in case["rows"]:
                for name in list(row):
                    if name.endswith("_bytes"):
                        row[name] = None
        _parent(data, location)[location[-1]] = value

    return mutate


def _mad_scaled(samples: list[float]) -> float:
    center = statistics.median(samples)
    return 1.4826 * statistics.median([abs(sample - center) for sample in samples])


# (mutation, code, path, fragment of the message)
BROKEN_VARIANTS: dict[str, tuple[Mutation, ProblemCode, str, str]] = {
    "schema_version_2": (
        assign(("schema_version",), 2),
        ProblemCode.UNSUPPORTED_VALUE,
        "schema_version",
        "expected 1, found 2",
    ),
    "unknown_top_level_field": (
        assign(("cases_extra",), []),
        ProblemCode.UNEXPECTED_FIELD,
        "cases_extra",
        "at the top level",
    ),
    "protocol_missing": (delete(("protocol",)), ProblemCode.MISSING, "protocol", "required"),
    "protocol_order_not_ab_ba": (
        assign(("protocol", "order"), "AABB"),
        ProblemCode.UNSUPPORTED_VALUE,
        "protocol.order",
        "expected 'AB/BA', found string \"AABB\"",
    ),
    "torch_version_missing": (
        delete(("environment", "torch")),
        ProblemCode.MISSING,
        "environment.torch",
        "required",
    ),
    "gpu_null_in_cuda_file": (
        assign(("environment", "gpu"), None),
        ProblemCode.NULL_OUTSIDE_CPU_FILE,
        "environment.gpu",
        "found null, which is allowed only in a CPU smoke file",
    ),
    "unknown_device": (
        assign(("environment", "device"), "tpu"),
        ProblemCode.UNSUPPORTED_VALUE,
        "environment.device",
        "expected 'cuda' or 'cpu'",
    ),
    "no_cases": (assign(("cases",), []), ProblemCode.TOO_SHORT, "cases", "at least 1 item"),
    "empty_case_name": (
        assign(("cases", 1, "case"), ""),
        ProblemCode.TOO_SHORT,
        "cases[1].case",
        "at least 1 character",
    ),
    "batch_zero": (
        assign(("cases", 0, "batch"), 0),
        ProblemCode.OUT_OF_RANGE,
        "cases[0].batch",
        "a number greater than or equal to 1, found 0",
    ),
    "length_as_string": (
        assign(("cases", 0, "length"), "2048"),
        ProblemCode.WRONG_TYPE,
        "cases[0].length",
        'expected a valid integer, found string "2048"',
    ),
    "typo_in_config": (
        assign(("cases", 2, "config", "widht"), 1536),
        ProblemCode.UNEXPECTED_FIELD,
        "cases[2].config.widht",
        "expected only the fields width, rnn_width, depth in config",
    ),
    "typo_in_optimizer_step": (
        assign((*STEP, "medain_ms"), 1.0),
        ProblemCode.UNEXPECTED_FIELD,
        "cases[0].rows[1].optimizer_step.medain_ms",
        "in optimizer_step",
    ),
    "no_rows": (
        assign(("cases", 1, "rows"), []),
        ProblemCode.TOO_SHORT,
        "cases[1].rows",
        "at least 1 item, found 0",
    ),
    "controller_missing": (
        delete((*ROW, "controller")),
        ProblemCode.MISSING,
        "cases[0].rows[1].controller",
        "required",
    ),
    "no_samples": (
        assign((*STEP, "samples_ms"), []),
        ProblemCode.TOO_SHORT,
        "cases[0].rows[1].optimizer_step.samples_ms",
        "at least 1 item",
    ),
    "negative_sample": (
        assign((*STEP, "samples_ms", 3), -24.8),
        ProblemCode.OUT_OF_RANGE,
        "cases[0].rows[1].optimizer_step.samples_ms[3]",
        "a number greater than 0, found -24.8",
    ),
    "zero_sample": (
        assign((*STEP, "samples_ms", 0), 0),
        ProblemCode.OUT_OF_RANGE,
        "cases[0].rows[1].optimizer_step.samples_ms[0]",
        "a number greater than 0, found 0",
    ),
    "nan_sample": (
        assign((*STEP, "samples_ms", 5), float("nan")),
        ProblemCode.NOT_FINITE,
        "cases[0].rows[1].optimizer_step.samples_ms[5]",
        "expected a finite number, found NaN",
    ),
    "infinite_sample": (
        assign((*STEP, "samples_ms", 9), float("inf")),
        ProblemCode.NOT_FINITE,
        "cases[0].rows[1].optimizer_step.samples_ms[9]",
        "found Infinity",
    ),
    "sample_as_string": (
        assign((*STEP, "samples_ms", 2), "24.8"),
        ProblemCode.WRONG_TYPE,
        "cases[0].rows[1].optimizer_step.samples_ms[2]",
        "expected a valid number",
    ),
    "median_wrong": (
        recompute("median_ms", lambda samples: statistics.median(samples) * (1 + 1e-6)),
        ProblemCode.STATISTIC_MISMATCH,
        "cases[0].rows[1].optimizer_step.median_ms",
        "recomputed from samples_ms",
    ),
    "mean_of_first_nine": (
        recompute("mean_ms", lambda samples: statistics.fmean(samples[:-1])),
        ProblemCode.STATISTIC_MISMATCH,
        "cases[0].rows[1].optimizer_step.mean_ms",
        "recomputed from samples_ms",
    ),
    "std_with_ddof_1": (
        recompute("std_ms", statistics.stdev),
        ProblemCode.STATISTIC_MISMATCH,
        "cases[0].rows[1].optimizer_step.std_ms",
        "recomputed from samples_ms",
    ),
    "mad_scaled_for_normal": (
        recompute("mad_ms", _mad_scaled),
        ProblemCode.STATISTIC_MISMATCH,
        "cases[0].rows[1].optimizer_step.mad_ms",
        "recomputed from samples_ms",
    ),
    "minimum_is_second_smallest": (
        recompute("minimum_ms", lambda samples: sorted(samples)[1]),
        ProblemCode.STATISTIC_MISMATCH,
        "cases[0].rows[1].optimizer_step.minimum_ms",
        "recomputed from samples_ms",
    ),
    "maximum_is_mean": (
        recompute("maximum_ms", statistics.fmean),
        ProblemCode.STATISTIC_MISMATCH,
        "cases[0].rows[1].optimizer_step.maximum_ms",
        "recomputed from samples_ms",
    ),
    "negative_std": (
        assign((*STEP, "std_ms"), -0.1),
        ProblemCode.OUT_OF_RANGE,
        "cases[0].rows[1].optimizer_step.std_ms",
        "a number greater than or equal to 0",
    ),
    "negative_baseline": (
        assign((*ROW, "baseline_allocated_bytes"), -1),
        ProblemCode.OUT_OF_RANGE,
        "cases[0].rows[1].baseline_allocated_bytes",
        "a number greater than or equal to 0, found -1",
    ),
    "bytes_as_float": (
        assign((*ROW, "peak_allocated_bytes"), 3.2e9),
        ProblemCode.WRONG_TYPE,
        "cases[0].rows[1].peak_allocated_bytes",
        "expected a valid integer, found 3200000000.0",
    ),
    "parameters_as_boolean": (
        assign((*ROW, "parameters"), True),
        ProblemCode.WRONG_TYPE,
        "cases[0].rows[1].parameters",
        "found true",
    ),
    "allocated_delta_off_by_one": (
        assign((*ROW, "peak_allocated_delta_bytes"), 1_689_409_025),
        ProblemCode.DELTA_MISMATCH,
        "cases[0].rows[1].peak_allocated_delta_bytes",
        "expected peak_allocated_bytes - baseline_allocated_bytes = ",
    ),
    "reserved_peak_below_baseline": (
        peak_below_baseline,
        ProblemCode.PEAK_BELOW_BASELINE,
        "cases[0].rows[1].peak_reserved_bytes",
        "expected at least baseline_reserved_bytes = ",
    ),
    "memory_null_in_cuda_file": (
        assign((*ROW, "peak_reserved_bytes"), None),
        ProblemCode.NULL_OUTSIDE_CPU_FILE,
        "cases[0].rows[1].peak_reserved_bytes",
        'found null, which is allowed only in a CPU smoke file (environment.device == "cpu")',
    ),
    "duplicate_case_name": (
        duplicate_case_name,
        ProblemCode.DUPLICATE_CASE,
        "cases[2].case",
        'found "state2048_short" again (first at cases[0])',
    ),
    "duplicate_row": (
        duplicate_row,
        ProblemCode.DUPLICATE_ROW,
        "cases[0].rows[1]",
        '("rglru", "fused_grouped_prefix32_hierarchical_chunk16", null) again '
        "(first at cases[0].rows[0])",
    ),
    "gpu_named_in_cpu_file": (
        cpu_file_with(("environment", "gpu"), "NVIDIA H200"),
        ProblemCode.VALUE_IN_CPU_FILE,
        "environment.gpu",
        "expected null in a CPU smoke file",
    ),
    "memory_measured_in_cpu_file": (
        cpu_file_with((*ROW, "baseline_reserved_bytes"), 1024),
        ProblemCode.VALUE_IN_CPU_FILE,
        "cases[0].rows[1].baseline_reserved_bytes",
        "expected null in a CPU smoke file",
    ),
}


@pytest.mark.parametrize(
    ("mutate", "code", "path", "fragment"),
    list(BROKEN_VARIANTS.values()),
    ids=list(BROKEN_VARIANTS),
)
def test_broken_variant_is_rejected(
    reference: dict[str, Any], mutate: Mutation, code: ProblemCode, path: str, fragment: str
) -> None:
    mutate(reference)
    report = validate(reference)
    assert not report.ok
    matching = [problem for problem in report.problems if problem.path == path]
    assert matching, f"no problem at {path}: {report.problems}"
    assert matching[0].code is code
    assert fragment in matching[0].message
    assert "found" in matching[0].message


def test_missing_sections_and_a_non_object_file_are_rejected() -> None:
    report = validate({"schema_version": 1})
    assert {problem.path for problem in report.problems} == {"protocol", "environment", "cases"}
    (problem,) = validate_json_data([1, 2]).problems
    assert (problem.code, problem.path) == (ProblemCode.WRONG_TYPE, "")
    assert problem.message == "expected a JSON object, found a list of 2 items"


def test_every_problem_is_reported_in_one_pass(reference: dict[str, Any]) -> None:
    reference["cases"][0]["rows"][0]["optimizer_step"]["median_ms"] += 1.0
    reference["cases"][2]["rows"][1]["peak_allocated_delta_bytes"] += 1
    duplicate_case_name(reference)
    paths = [problem.path for problem in validate(reference).problems]
    assert paths == [
        "cases[0].rows[0].optimizer_step.median_ms",
        "cases[2].case",
        "cases[2].rows[1].peak_allocated_delta_bytes",
    ]
