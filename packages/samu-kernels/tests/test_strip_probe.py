"""The strip probe: its kernel writes every element of the product at every phase (under the
interpreter on CPU), its probe lists and its refusals (the timing needs a GPU:
``test_gpu.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from samu_kernels.strip_probe import (
    MEDIUM_WIDTH,
    StripProbe,
    grid_probes,
    main,
    phase_probes,
    probe_bytes,
    stream_strips,
)


@pytest.mark.parametrize(
    "probe",
    [
        StripProbe("t", 3, 16, 32, 2, 1),
        StripProbe("t", 3, 16, 32, 2, 1, shift_tiles=1),
        StripProbe("t", 2, 32, 16, 3, 2, shift_tiles=3),
        StripProbe("t", 4, 8, 32, 2, 1, shift_tiles=2),
        StripProbe("t", 5, 16, 32, 2, 1, scattered=True),
    ],
    ids=lambda probe: probe.phase,
)
def test_every_phase_writes_the_whole_product(probe: StripProbe, device: torch.device) -> None:
    length = 4 * probe.tile_rows
    x = torch.randn(length, probe.width, device=device)
    y = torch.randn_like(x)
    out = torch.full_like(x, float("nan"))
    stream_strips(probe, x, y, out)
    torch.testing.assert_close(out, x * y, rtol=0, atol=0)


def test_planes_of_another_width_or_a_partial_tile_are_refused() -> None:
    probe = StripProbe("t", 2, 16, 32, 2, 1)
    x = torch.zeros(64, 48)
    with pytest.raises(ValueError, match=r"x: expected \[L, 32\] with L a multiple of 32"):
        stream_strips(probe, x, x, x)
    x = torch.zeros(48, 32)
    with pytest.raises(ValueError, match="multiple of 32"):
        stream_strips(probe, x, x, x)
    x = torch.zeros(64, 32)
    with pytest.raises(ValueError, match=r"y: expected x's shape, dtype and device"):
        stream_strips(probe, x, x.double(), x)
    with pytest.raises(ValueError, match=r"out: expected x's shape"):
        stream_strips(probe, x, x, torch.zeros(64, 16))
    with pytest.raises(ValueError, match="out: expected a contiguous tensor"):
        stream_strips(probe, x, x, torch.zeros(32, 64).t())


def test_the_phase_table_cuts_the_medium_shape_in_16_and_32_channel_strips() -> None:
    probes = phase_probes()
    assert {probe.width for probe in probes} == {MEDIUM_WIDTH}
    assert [probe.phase for probe in probes if probe.channels == 16] == [
        "in step",
        "shift 1 tiles",
        "shift 8 tiles",
        "shift 27 tiles",
        "scattered",
    ]


def test_the_grid_table_holds_one_and_two_programs_per_sm_in_step_and_scattered() -> None:
    probes = grid_probes(132)
    assert sorted({probe.programs for probe in probes}) == [132, 160, 264, 320]
    assert all(probe.channels == 16 and probe.shift_tiles == 0 for probe in probes)
    assert sum(probe.scattered for probe in probes) == len(probes) // 2


def test_bytes_count_two_planes_read_and_one_written() -> None:
    assert probe_bytes(StripProbe("t", 160, 16, 64, 3, 4), 8192) == 3 * 8192 * 2560 * 2


def _refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--length", "1000"], "--length must be a positive multiple of 256, got 1000"),
        (["--length", "0"], "--length must be a positive multiple of 256"),
        (["--rounds", "1"], "--rounds must be at least 2"),
        (["--out", "/nonexistent/strips.json"], "folder /nonexistent does not exist"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert message in _refusal(capsys, argv)


def test_an_existing_out_file_is_kept(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "strips.json"
    out.write_text("mine")
    assert "exists; pass --force" in _refusal(capsys, ["--out", str(out)])
    assert out.read_text() == "mine"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message of a machine without a GPU")
def test_without_a_gpu_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


def test_planes_past_the_kernels_int32_offsets_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from samu_kernels import strip_probe  # noqa: PLC0415

    monkeypatch.setattr(strip_probe, "MAX_ELEMENTS", 1000)
    x = torch.zeros(64, 32)
    with pytest.raises(ValueError, match=r"x: at most 1000 elements .*int32 offsets.*got 2048"):
        stream_strips(StripProbe("t", 2, 16, 32, 2, 1), x, x, x)
