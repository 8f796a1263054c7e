"""The samu-schema command: exit codes, output lines, --json, and every kind of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from samu_schema import MAX_FILE_BYTES, json_schema
from samu_schema.cli import main


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def invalid_path(tmp_path: Path, reference: dict[str, Any]) -> Path:
    reference["cases"][0]["rows"][1]["optimizer_step"]["mean_ms"] = 1.0
    reference["cases"][1]["config"]["depht"] = 1
    return write_json(tmp_path / "invalid.json", reference)


def test_valid_file_exits_0(reference_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(reference_path)]) == 0
    assert capsys.readouterr().out == f"{reference_path}: ok\n"


def test_invalid_file_exits_1_with_one_line_per_problem(
    invalid_path: Path, reference_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(reference_path), str(invalid_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{reference_path}: ok"
    assert lines[1] == (
        f"{invalid_path}: cases[1].config.depht: expected only the fields width, rnn_width, "
        "depth in config, found an unexpected field"
    )
    assert len(lines) == 2


def test_rules_are_reported_once_the_structure_is_valid(
    invalid_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(invalid_path.read_text(encoding="utf-8"))
    del data["cases"][1]["config"]["depht"]
    write_json(invalid_path, data)
    assert main(["validate", str(invalid_path)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{invalid_path}: cases[0].rows[1].optimizer_step.mean_ms: expected ")
    assert line.endswith("(recomputed from samples_ms), found 1.0")


def test_json_output_lists_every_file(
    reference_path: Path, invalid_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    status = main(["validate", "--json", str(reference_path), str(invalid_path), str(missing)])
    assert status == 2
    captured = capsys.readouterr()
    assert captured.err == ""
    document = json.loads(captured.out)
    assert document["ok"] is False
    valid, invalid, unreadable = document["files"]
    assert valid == {"file": str(reference_path), "ok": True, "error": None, "problems": []}
    assert invalid["ok"] is False
    assert invalid["problems"] == [
        {
            "code": "unexpected_field",
            "path": "cases[1].config.depht",
            "message": "expected only the fields width, rnn_width, depth in config, "
            "found an unexpected field",
        }
    ]
    assert unreadable["ok"] is False
    assert unreadable["error"] == f"{missing}: no such file"


def test_json_output_of_valid_files_is_ok(
    reference_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--json", str(reference_path)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def assert_one_error_line(error: str, path: Path, fragment: str) -> None:
    assert error.startswith(f"samu-schema: error: {path}: ")
    assert fragment in error
    assert error.count("\n") == 1
    assert error.endswith("\n")


def _sparse_file_over_the_limit(path: Path) -> None:
    with path.open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)


BAD_INPUTS = {
    "malformed_json": (b'{"schema_version": 1,', "malformed JSON at line 1 column 22"),
    "empty": (b"", "is empty"),
    "only_whitespace": (b" \n\t\n", "is empty"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "is a binary file"),
    "not_utf8": (b'{"gpu": "caf\xe9"}', "is not UTF-8 text (byte 0xe9 at offset 12)"),
    "repeated_key": (b'{"a": 1, "a": 2}', "malformed JSON: key 'a' repeated in one object"),
    "trailing_garbage": (b"{} {}", "malformed JSON at line 1 column 4: Extra data"),
}


@pytest.mark.parametrize(("content", "fragment"), BAD_INPUTS.values(), ids=BAD_INPUTS)
def test_bad_file_content_is_one_line_and_exit_2(
    tmp_path: Path, content: bytes, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert main(["validate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_error_line(captured.err, path, fragment)


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda path: None, "no such file"),
        (lambda path: path.mkdir(), "is a directory, expected a JSON file"),
        (_sparse_file_over_the_limit, "larger than the limit of 67108864 bytes (64 MiB)"),
    ],
    ids=["missing", "directory", "too_large"],
)
def test_bad_paths_are_one_line_and_exit_2(
    tmp_path: Path, make: Any, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "result.json"
    make(path)
    assert main(["validate", str(path)]) == 2
    assert_one_error_line(capsys.readouterr().err, path, fragment)


def test_unreadable_file_wins_over_invalid_file(
    invalid_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(tmp_path / "missing.json"), str(invalid_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{invalid_path}: cases[1].config.depht: ")


@pytest.mark.parametrize("argv", [[], ["validate"], ["check", "x.json"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    assert "usage: samu-schema" in capsys.readouterr().err


def test_schema_command_prints_the_shipped_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json_schema()


def test_installed_command_runs_without_traceback(tmp_path: Path, reference_path: Path) -> None:
    command = [sys.executable, "-m", "samu_schema", "validate", str(reference_path), str(tmp_path)]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    assert finished.returncode == 2
    assert finished.stdout == f"{reference_path}: ok\n"
    assert (
        finished.stderr == f"samu-schema: error: {tmp_path}: is a directory, expected a JSON file\n"
    )
