"""Result files: writing case by case, refusing invalid results, reading, environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import samu_schema
from samu_bench import (
    PROTOCOL,
    BenchError,
    ProtocolSettings,
    ResultWriter,
    collect_environment,
    load_result_file,
)
from samu_bench.environment import git_revision

ENVIRONMENT = {"torch": "2.15.0", "cuda": None, "gpu": None, "device": "cpu"}


def cpu_case(name: str) -> dict[str, Any]:
    step = samu_schema.summarize([2.0, 1.0, 3.0]).model_dump(mode="json")
    memory = {
        f"{prefix}_{kind}_bytes": None
        for prefix in ("baseline", "peak")
        for kind in ("allocated", "reserved")
    }
    memory |= {"peak_allocated_delta_bytes": None, "peak_reserved_delta_bytes": None}
    row: dict[str, Any] = {"architecture": "rglru", "backend": "reference", "controller": None}
    row |= {"optimizer_step": step, **memory, "parameters": 10}
    config = {"width": 8, "rnn_width": 16, "depth": 1}
    return {"case": name, "batch": 1, "length": 4, "config": config, "rows": [row]}


def test_writer_rewrites_the_file_after_each_case(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    writer = ResultWriter(path, ENVIRONMENT, ProtocolSettings(samples=3), "perf_counter")
    writer.add_case(cpu_case("one"))
    assert [case["case"] for case in json.loads(path.read_text())["cases"]] == ["one"]
    writer.add_case(cpu_case("two"))
    document = load_result_file(path)
    assert [case["case"] for case in document["cases"]] == ["one", "two"]
    assert document == writer.document
    protocol = document["protocol"]
    assert {key: protocol[key] for key in PROTOCOL} == dict(PROTOCOL)
    assert (protocol["samples_per_row"], protocol["warmup_steps"]) == (3, 3)
    assert protocol["timer"] == "perf_counter"


def test_writer_refuses_an_existing_file_unless_told(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text("keep me")
    writer = ResultWriter(path, ENVIRONMENT, ProtocolSettings(), "perf_counter")
    with pytest.raises(BenchError, match="exists; pass --force"):
        writer.add_case(cpu_case("one"))
    assert path.read_text() == "keep me"
    forced = ResultWriter(path, ENVIRONMENT, ProtocolSettings(), "perf_counter", overwrite=True)
    forced.add_case(cpu_case("one"))
    assert load_result_file(path)["cases"][0]["case"] == "one"


def test_writer_never_writes_an_invalid_result(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    case = cpu_case("one")
    case["rows"][0]["optimizer_step"]["median_ms"] = 2.5
    writer = ResultWriter(path, ENVIRONMENT, ProtocolSettings(), "perf_counter")
    with pytest.raises(BenchError, match=r"invalid result, not written: .*median_ms") as info:
        writer.add_case(case)
    assert "\n" not in str(info.value)
    assert not path.exists()
    assert writer.cases == []


def test_load_result_file_errors(tmp_path: Path, reference_document: dict[str, Any]) -> None:
    with pytest.raises(BenchError, match="no such file"):
        load_result_file(tmp_path / "missing.json")
    with pytest.raises(BenchError, match="directory"):
        load_result_file(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(BenchError, match="malformed JSON"):
        load_result_file(broken)
    reference_document["cases"][0]["rows"][0]["peak_allocated_delta_bytes"] += 1
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps(reference_document))
    with pytest.raises(BenchError, match=r"not a valid result file .*peak_allocated_delta_bytes"):
        load_result_file(invalid)


def test_cpu_environment() -> None:
    environment = collect_environment(torch.device("cpu"))
    assert environment["device"] == "cpu"
    assert environment["gpu"] is None
    assert environment["cuda"] is None
    assert environment["driver"] is None
    assert environment["torch"] == torch.__version__
    for key in ("python", "platform"):
        assert environment[key]
    for switch in ("samu_kernels_fast_math", "samu_kernels_tanh_sigmoid"):
        assert isinstance(environment[switch], bool)
    assert set(environment["samu_packages"]) == {
        "samu-schema",
        "samu-kernels",
        "samu-modules",
        "samu-bench",
    }


def test_git_revision_outside_a_work_tree_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAMU_GIT_REVISION", raising=False)
    assert git_revision(tmp_path) is None


def test_git_revision_outside_a_work_tree_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMU_GIT_REVISION", "92f5319")
    assert git_revision(tmp_path) == "92f5319"


def test_git_revision_from_the_environment_overrides_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMU_GIT_REVISION", "92f5319")
    assert git_revision(Path(__file__).parent) == "92f5319"
    monkeypatch.delenv("SAMU_GIT_REVISION")
    assert git_revision(Path(__file__).parent) not in (None, "92f5319")
