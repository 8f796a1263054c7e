"""The result-file options every samu_kernels command shares: nothing is overwritten
without --force, and a file that could not be written is refused before any work."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from samu_kernels import benchmark, fused_benchmark
from samu_kernels.result_file import add_result_file_options, refuse_unwritable_result_file


def _check(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_result_file_options(parser)
    args = parser.parse_args(argv)
    refuse_unwritable_result_file(parser, args.out, force=args.force)
    return args


def test_a_new_file_in_an_existing_folder_passes(tmp_path: Path) -> None:
    assert _check(["--out", str(tmp_path / "r.json")]).out == tmp_path / "r.json"
    assert _check([]).out is None


def test_an_existing_file_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    out.write_text("mine")
    with pytest.raises(SystemExit):
        _check(["--out", str(out)])
    assert "exists; pass --force to overwrite it" in capsys.readouterr().err
    assert _check(["--out", str(out), "--force"]).force
    assert out.read_text() == "mine"


def test_a_missing_folder_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _check(["--out", str(tmp_path / "no" / "r.json")])
    assert f"folder {tmp_path / 'no'} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("command", [benchmark.main, fused_benchmark.main])
def test_the_benchmarks_refuse_to_overwrite_before_any_work(
    command: Callable[[Sequence[str]], Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    out.write_text("mine")
    with pytest.raises(SystemExit) as exited:
        command(["--out", str(out)])
    assert exited.value.code == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert out.read_text() == "mine"


def test_the_fused_benchmark_refuses_a_budget_below_one_repetition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        fused_benchmark.main(["--out", str(tmp_path / "f.json"), "--rep-ms", "0"])
    assert "--rep-ms >= 1, got 25 and 0" in capsys.readouterr().err
