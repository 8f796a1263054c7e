"""The geometry A/B command: its round order, its shapes and its refusals (the timing itself
needs a GPU: ``test_gpu.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from samu_kernels import compare_tiles
from samu_kernels.benchmark import REFERENCE_SHAPES
from samu_kernels.common.geometry import TILE_ENV
from samu_kernels.compare_tiles import HEURISTIC, interleaved_rounds, main, parse_shape


def test_rounds_alternate_the_order_so_every_geometry_meets_the_same_drift() -> None:
    assert interleaved_rounds(["a", "b", "c"], 4) == [
        ["a", "b", "c"],
        ["c", "b", "a"],
        ["a", "b", "c"],
        ["c", "b", "a"],
    ]


def test_shapes_are_three_sizes_or_a_reference_case() -> None:
    assert parse_shape("1,8192,2560") == (1, 8192, 2560)
    assert parse_shape(" 2, 40 ,24") == (2, 40, 24)
    assert parse_shape("state2560_medium") == REFERENCE_SHAPES["state2560_medium"]


@pytest.mark.parametrize("text", ["1,8192", "1,0,24", "1,-4,24", "a,b,c", "medium", ""])
def test_a_malformed_shape_names_what_was_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected B,L,R .*state2560_medium"):
        parse_shape(text)


def _refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


SAMU = ["--arch", "samu", "--shape", "1,64,16"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*SAMU, "--tile", HEURISTIC, "--tile", "warps=3"], "--tile 'warps=3': SAMU_KERNELS_TILE"),
        ([*SAMU, "--tile", HEURISTIC, "--tile", "rows=8"], "expected key=value pairs with keys"),
        ([*SAMU, "--tile", "programs=4"], "at least two geometries"),
        ([*SAMU, "--tile", "split=4", "--tile", "split=4"], "each geometry once"),
        (["--arch", "samu", "--shape", "1,64", "--tile", "a", "--tile", "b"], "--shape: expected"),
        ([*SAMU, "--backend", "chunk33", "--tile", HEURISTIC, "--tile", "split=4"], "--backend"),
        ([*SAMU, "--tile", HEURISTIC, "--tile", "split=4", "--rounds", "1"], "--rounds"),
        ([*SAMU, "--tile", HEURISTIC, "--tile", "split=4", "--jobs", "0"], "--jobs"),
        (["--arch", "mamba", "--shape", "1,64,16", "--tile", "a", "--tile", "b"], "--arch"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert message in _refusal(capsys, argv)


def test_an_existing_result_file_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ab.json"
    out.write_text("earlier results")
    argv = [*SAMU, "--tile", HEURISTIC, "--tile", "split=4", "--out", str(out)]
    assert "exists; pass --force" in _refusal(capsys, argv)
    assert out.read_text() == "earlier results"
    missing = tmp_path / "no-such-folder" / "ab.json"
    argv = [*SAMU, "--tile", HEURISTIC, "--tile", "split=4", "--out", str(missing)]
    assert "does not exist" in _refusal(capsys, argv)


def test_without_a_gpu_it_says_so_and_leaves_the_tile_variable_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(TILE_ENV, "split=8")
    assert main([*SAMU, "--tile", HEURISTIC, "--tile", "split=4"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out
    assert os.environ[TILE_ENV] == "split=8"


def test_kernel_names_are_shortened_but_stay_apart() -> None:
    from samu_kernels.compare_tiles import _short_name  # noqa: PLC0415

    assert _short_name("backward_split_kernel") == "backward_split_kernel"
    shortened = {
        _short_name("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float>>(x)"),
        _short_name("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(x)"),
    }
    assert shortened == {"reduce_kernel<128, 4, at::na", "reduce_kernel<512, 1, at::na"}


def test_the_result_file_names_the_step_before_its_timings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compare_tiles, "provenance", lambda device: {"device": str(device)})
    out = tmp_path / "timings.json"
    compare_tiles.write_timings(
        out, torch.device("cpu"), "samu", "chunk32", (1, 64, 32), 4, {"ablations": {"base": {}}}
    )
    assert json.loads(out.read_text()) == {
        "device": "cpu",
        "architecture": "samu",
        "backend": "chunk32",
        "shape": [1, 64, 32],
        "rounds": 4,
        "ablations": {"base": {}},
    }
