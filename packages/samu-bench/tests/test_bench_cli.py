"""The samu-bench command, in-process, on the CPU smoke path."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import samu_schema
from samu_bench import cli, measure_case
from samu_bench.cli import main
from samu_bench.results import row_entry

REFERENCE_FILE = Path(__file__).parent / "data" / "h800_pcie_results.json"
TINY = ["--length", "9", "--width", "16", "--rnn-width", "16", "--samples", "2", "--warmup", "2"]


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test takes the CPU smoke path, also on a machine with a GPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line of the captured stderr (a run may print notices and progress)."""
    error = capsys.readouterr().err
    assert "Traceback" not in error
    [line] = [line for line in error.splitlines() if line.startswith("samu-bench")]
    assert error.endswith(line + "\n")
    return line


def test_default_run_is_the_cpu_smoke_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--samples", "2"]) == 0
    [path] = tmp_path.glob("samu-bench-cpu-*.json")
    document = json.loads(path.read_text())
    assert samu_schema.validate(document).ok
    environment = document["environment"]
    assert (environment["device"], environment["gpu"]) == ("cpu", None)
    [case] = document["cases"]
    assert (case["case"], case["batch"], case["length"]) == ("cpu_smoke", 1, 64)
    assert case["config"] == {"width": 64, "rnn_width": 64, "depth": 1}
    for row in case["rows"]:
        assert row["backend"] == "reference"
        assert len(row["optimizer_step"]["samples_ms"]) == 2
        assert row["peak_allocated_bytes"] is None
    assert document["protocol"]["timer"] == "perf_counter"
    output = capsys.readouterr()
    assert "CPU smoke run" in output.err
    assert "samu:reference:reference" in output.out


def test_custom_case_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / ("a_directory_name_long_enough_to_pass_the_terminal_width" * 2) / "tiny.json"
    out.parent.mkdir()
    args = ["run", *TINY, "--name", "tiny", "--row", "samu:reference:reference", "--out", str(out)]
    assert main(args) == 0
    [case] = json.loads(out.read_text())["cases"]
    assert (case["case"], case["length"], case["config"]["width"]) == ("tiny", 9, 16)
    assert [row["architecture"] for row in case["rows"]] == ["samu"]
    assert f"wrote {out}\n" in capsys.readouterr().err  # one line, the path whole, when piped


def test_out_is_never_overwritten_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    out.write_text("precious")
    assert main(["run", *TINY, "--out", str(out)]) == 1
    assert "exists; pass --force" in one_line_error(capsys)
    assert out.read_text() == "precious"
    assert main(["run", *TINY, "--out", str(out), "--force"]) == 0
    assert samu_schema.validate(out).ok


def test_ctrl_c_keeps_the_finished_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "two.toml"
    sizes = "batch = 1\nlength = 5\nwidth = 16\nrnn_width = 16\ndepth = 1\n"
    config.write_text(f'[[cases]]\nname = "first"\n{sizes}[[cases]]\nname = "second"\n{sizes}')
    measured: list[str] = []

    def interrupt_second(plan: Any, *args: Any) -> dict[str, Any]:
        measured.append(plan.case.name)
        if plan.case.name == "second":
            raise KeyboardInterrupt
        return measure_case(plan, *args)

    monkeypatch.setattr("samu_bench.run_command.measure_case", interrupt_second)
    out = tmp_path / "partial.json"
    assert main(["run", "--config", str(config), "--samples", "2", "--out", str(out)]) == 130
    assert measured == ["first", "second"]
    document = json.loads(out.read_text())
    assert samu_schema.validate(document).ok
    assert [case["case"] for case in document["cases"]] == ["first"]
    assert "kept the 1 finished case(s) of 2" in capsys.readouterr().err


def test_ctrl_c_before_any_case_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(*args: Any) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr("samu_bench.run_command.measure_case", interrupt)
    out = tmp_path / "none.json"
    assert main(["run", *TINY, "--out", str(out)]) == 130
    assert not out.exists()
    assert "nothing was written" in capsys.readouterr().err


def test_an_invalid_result_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def corrupted(*args: Any) -> dict[str, Any]:
        entry = row_entry(*args)
        entry["optimizer_step"]["mean_ms"] *= 2
        return entry

    monkeypatch.setattr("samu_bench.protocol.row_entry", corrupted)
    out = tmp_path / "bad.json"
    assert main(["run", *TINY, "--out", str(out)]) == 1
    assert "invalid result, not written" in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "state2048_short"], "needs a CUDA GPU"),
        (["--row", "rglru:fused_grouped_prefix32_hierarchical_chunk16"], "needs a CUDA GPU"),
        (["--row", "rglru"], "must look like architecture:backend"),
        (["--case", "cpu_smoke", "--case", "state2048_short", "--batch", "2"], "exactly one"),
        (["--config", "bench.toml", "--case", "cpu_smoke"], "do not combine"),
        (["--config", "bench.toml", "--cuda-graphs"], "do not combine"),
        (["--cuda-graphs"], "CUDA graphs need a CUDA GPU"),
        (["--step-graphs"], "CUDA graphs need a CUDA GPU"),
        (["--config", "bench.toml", "--step-graphs"], "do not combine"),
        (["--config", "missing.toml"], "no such config file"),
        (["--out", "no/such/dir/result.json"], "does not exist"),
    ],
)
def test_run_errors_are_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench.toml").write_text('[[cases]]\nname = "cpu_smoke"\n')
    assert main(["run", *args]) == 1
    assert message in one_line_error(capsys)
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["fly"],
        ["run", "--warmup", "1"],
        ["run", "--samples", "0"],
        ["run", "--case", "nope"],
        ["show"],
        ["compare", "a.json"],
        ["compare", "a.json", "b.json", "--confidence", "2"],
        ["plot", "file.json"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    assert one_line_error(capsys).startswith("samu-bench")


def test_show_prints_every_case_and_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(REFERENCE_FILE)]) == 0
    output = capsys.readouterr().out
    assert "NVIDIA H800 PCIe" in output
    for name in ("state2048_short", "state2560_medium", "400m_block_long"):
        assert name in output
    assert "samu:fused_output_fused_write_shared_sfu_chunk32:fp32_fused_coords" in output
    assert "24.808" in output  # a median
    assert "% of floor" in output
    assert "18.5%" in output  # rglru state2048_short against the H800 PCIe floor


@pytest.mark.parametrize("command", ["show", "plot"])
def test_unusable_files_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    extra = ["-o", str(tmp_path / "out.png")] if command == "plot" else []
    assert main([command, str(tmp_path / "missing.json"), *extra]) == 1
    assert "no such file" in one_line_error(capsys)
    invalid = tmp_path / "invalid.json"
    document = json.loads(REFERENCE_FILE.read_text())
    del document["cases"][0]["rows"][0]["parameters"]
    invalid.write_text(json.dumps(document))
    assert main([command, str(invalid), *extra]) == 1
    assert "not a valid result file" in one_line_error(capsys)


def test_compare_against_itself_is_within_noise(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(REFERENCE_FILE), str(REFERENCE_FILE), "--resamples", "500"]) == 0
    output = capsys.readouterr().out
    assert output.count("within noise") == 6
    assert "GPUs differ" not in output


def test_compare_a_cpu_run_with_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "cpu.json"
    assert main(["run", *TINY, "--out", str(new)]) == 0
    capsys.readouterr()
    assert main(["compare", str(REFERENCE_FILE), str(new), "--resamples", "100"]) == 0
    output = capsys.readouterr().out
    assert "The GPUs differ: BASE ran on NVIDIA H800 PCIe, NEW on CPU" in output
    assert "only in" in output
    assert f"only in {new}: custom / rglru:reference" in output
    assert "No row is in both files." in output


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "samples.png"
    assert main(["plot", str(REFERENCE_FILE), "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")


def test_plot_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    out = tmp_path / "samples.png"
    assert main(["plot", str(REFERENCE_FILE), "-o", str(out)]) == 1
    assert "pip install 'samu-bench[plot]'" in one_line_error(capsys)
    assert not out.exists()


def test_unexpected_failures_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(document: Any) -> Any:
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(cli, "result_tables", explode)
    assert main(["show", str(REFERENCE_FILE)]) == 1
    assert one_line_error(capsys) == "samu-bench: error: RuntimeError: first line"
