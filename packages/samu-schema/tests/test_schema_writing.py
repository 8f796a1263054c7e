"""write_result_file: validates first, writes atomically, never overwrites by accident."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from samu_schema import (
    InvalidResultError,
    ProblemCode,
    ResultFile,
    summarize,
    validate,
    write_result_file,
)


def test_writes_a_valid_file_that_reads_back_equal(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    target = tmp_path / "results.json"
    assert write_result_file(reference, target) == target
    assert json.loads(target.read_text(encoding="utf-8")) == reference
    assert validate(target).ok
    assert list(tmp_path.iterdir()) == [target]


def test_writes_models_and_summarized_rows(tmp_path: Path, reference: dict[str, Any]) -> None:
    reference["cases"][0]["rows"][0]["optimizer_step"] = summarize([2.0, 1.0, 4.0])
    target = write_result_file(reference, tmp_path / "summarized.json")
    written = json.loads(target.read_text(encoding="utf-8"))
    assert written["cases"][0]["rows"][0]["optimizer_step"]["median_ms"] == 2.0
    model = ResultFile.model_validate(written)
    copy_target = write_result_file(model, tmp_path / "from_model.json")
    assert json.loads(copy_target.read_text(encoding="utf-8")) == written


def test_refuses_an_invalid_result_and_writes_nothing(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    reference["cases"][0]["rows"][0]["optimizer_step"]["samples_ms"][0] = float("nan")
    with pytest.raises(InvalidResultError) as raised:
        write_result_file(reference, tmp_path / "results.json")
    (problem,) = raised.value.report.problems
    assert problem.code is ProblemCode.NOT_FINITE
    assert "cases[0].rows[0].optimizer_step.samples_ms[0]: expected a finite number" in str(
        raised.value
    )
    assert list(tmp_path.iterdir()) == []


def test_refuses_to_overwrite_unless_asked(tmp_path: Path, reference: dict[str, Any]) -> None:
    target = tmp_path / "results.json"
    target.write_text("previous run\n", encoding="utf-8")
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        write_result_file(reference, target)
    assert target.read_text(encoding="utf-8") == "previous run\n"
    assert list(tmp_path.iterdir()) == [target]
    write_result_file(reference, target, overwrite=True)
    assert json.loads(target.read_text(encoding="utf-8")) == reference
    assert list(tmp_path.iterdir()) == [target]


def test_rejects_data_that_is_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="data must be a mapping or a ResultFile, found list"):
        write_result_file([], tmp_path / "results.json")  # type: ignore[arg-type]
