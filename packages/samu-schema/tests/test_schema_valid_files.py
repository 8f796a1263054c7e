"""Files that must validate: the reference as it is, with extras, and CPU smoke files."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from samu_schema import ResultFile, ResultFileReadError, summarize, validate


def test_reference_file_validates_from_its_path(reference_path: Path) -> None:
    assert validate(reference_path).problems == []
    assert validate(str(reference_path)).ok


def test_reference_file_validates_as_data_and_as_model(reference: dict[str, Any]) -> None:
    untouched = copy.deepcopy(reference)
    assert validate(reference).ok
    assert reference == untouched
    assert validate(ResultFile.model_validate(reference)).ok


def test_extras_are_accepted_where_files_may_carry_them(reference: dict[str, Any]) -> None:
    reference["environment"].update(
        triton="3.6.0",
        driver="580.65",
        python="3.12.3",
        device="cuda",
        git_revision="e5aea71",
        hostname="h200-1",
        cudnn={"version": 91002},
    )
    reference["protocol"].update(warmup_steps=3, samples_per_row=10)
    reference["cases"][0]["note"] = "rerun after driver update"
    reference["cases"][0]["rows"][0].update(compiled=True, sample_limit=10, notes=None, peer="samu")
    assert validate(reference).problems == []


def test_cpu_smoke_file_validates(cpu_smoke: dict[str, Any]) -> None:
    assert validate(cpu_smoke).problems == []
    cpu_smoke["environment"]["cuda"] = "12.8"
    assert validate(cpu_smoke).problems == []


def test_rows_built_with_summarize_validate(reference: dict[str, Any]) -> None:
    samples = (3.0, 1.0, 2.5, 2.0)  # a tuple: any sequence is taken as a JSON array
    reference["cases"][0]["rows"][0]["optimizer_step"] = summarize(samples)
    assert validate(reference).problems == []


def test_unreadable_path_raises_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ResultFileReadError, match="no such file"):
        validate(tmp_path / "missing.json")


def test_unsupported_source_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="source must be a path, a mapping or a ResultFile"):
        validate(42)  # type: ignore[arg-type]
