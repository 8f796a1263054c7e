"""The strip probe: its kernels write every element of the product at every phase and every
tile of a schedule's segments (under the interpreter on CPU), its probe lists and its
refusals (the timing needs a GPU: ``test_gpu.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from samu_kernels.strip_probe import (
    MEDIUM_LENGTH,
    MEDIUM_WIDTH,
    StripProbe,
    grid_probes,
    main,
    phase_probes,
    probe_bytes,
    stream_schedule,
    stream_strips,
)
from samu_kernels.strip_probe.schedules import (
    ProgramSegments,
    Schedule,
    inserted_pieces,
    piece_major,
    schedule_probes,
    shifted_strips,
    whole_strips,
)

SMALL_ORDERS = {
    "whole strips": whole_strips(range(5), 5),
    "a subset": whole_strips(range(3), 5),
    "piece-major": piece_major(5, 5, 2, 3),
    "inserted pieces": inserted_pieces(5, 5, 3),
    "shifted": shifted_strips(3, 5, 1, 2),
}
"""Orders of 5 strips of 5 tiles on 3 programs (piece-major: 2 pieces, the second shorter)."""


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


def _covered(order: tuple[ProgramSegments, ...]) -> list[tuple[int, int]]:
    return [
        (strip, tile)
        for program in order
        for strip, first, tiles in program
        for tile in range(first, first + tiles)
    ]


@pytest.mark.parametrize("described", [False, True], ids=["pointers", "TMA"])
@pytest.mark.parametrize("name", list(SMALL_ORDERS))
def test_every_schedule_writes_its_tiles_of_the_product(
    name: str, described: bool, device: torch.device
) -> None:
    schedule = Schedule(name, SMALL_ORDERS[name], 80, 16, 16, 2, 1, described)
    x = torch.randn(80, 80, device=device)
    y = torch.randn_like(x)
    out = torch.full_like(x, float("nan"))
    stream_schedule(schedule, x, y, out)
    expected = torch.full_like(x, float("nan"))
    for strip, tile in _covered(schedule.segments):
        rows, lanes = slice(16 * tile, 16 * tile + 16), slice(16 * strip, 16 * strip + 16)
        expected[rows, lanes] = x[rows, lanes] * y[rows, lanes]
    torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)


def test_a_schedule_keeps_one_segment_table_per_device(device: torch.device) -> None:
    # A CUDA graph captured over a launch replays it with that table's memory, and no host
    # copy may run during a capture: the table is built on the first launch and kept.
    from samu_kernels import strip_probe  # noqa: PLC0415

    schedule = Schedule("kept", SMALL_ORDERS["piece-major"], 80, 16, 16, 2, 1, False)
    x = torch.randn(80, 80, device=device)
    stream_schedule(schedule, x, x, torch.empty_like(x))
    table = strip_probe._device_segment_table(schedule, x.device)
    stream_schedule(schedule, x, x, torch.empty_like(x))
    assert strip_probe._device_segment_table(schedule, x.device) is table
    assert table.tolist()[0] == [[0, 0, 3], [3, 0, 3], [1, 3, 2], [4, 3, 2]]


def test_the_schedules_stream_every_tile_of_the_medium_shape_once() -> None:
    schedules = schedule_probes(132, MEDIUM_LENGTH, MEDIUM_WIDTH, described=True)
    for schedule in schedules:
        covered = _covered(schedule.segments)
        n_tiles = MEDIUM_LENGTH // schedule.tile_rows
        assert len(set(covered)) == len(covered) == schedule.tiles
        strips = 132 if "one per SM" in schedule.name else 160
        assert schedule.tiles == strips * n_tiles, schedule.name
        assert schedule.programs == (strips if "whole" in schedule.name else 132)
    busiest = {(s.name, s.tile_rows): s.busiest_tiles * s.tile_rows for s in schedules}
    # Pieces even the SMs out: 1.25 strips' rows on the busiest program, against 2.
    assert busiest["piece-major, 4 pieces", 256] == busiest["inserted pieces", 256] == 10240
    assert busiest["160 whole strips", 128] == MEDIUM_LENGTH
    assert {(s.tile_rows, s.described) for s in schedules} == {(128, False), (256, True)}
    assert all(not s.described for s in schedule_probes(132, 8192, 2560, described=False))


def test_inserted_pieces_follow_each_other_in_time() -> None:
    order = inserted_pieces(160, 32, 132)
    pieces: dict[int, list[tuple[int, int, int]]] = {}
    for program in order:
        own_first = program[0][1] + program[0][2] if len(program) == 3 else 0
        extra = program[1] if len(program) == 3 else program[0]
        pieces.setdefault(extra[0], []).append((extra[1], extra[2], own_first))
    for strip_pieces in pieces.values():
        strip_pieces.sort()
        # Each piece starts at its own first tile's time, so it follows the one before it.
        assert all(start == when for start, _tiles, when in strip_pieces)
        assert sum(tiles for _start, tiles, _when in strip_pieces) == 32


def test_inserted_pieces_need_more_strips_than_programs_and_at_most_twice_as_many() -> None:
    for strips in (3, 7):
        with pytest.raises(ValueError, match="n_strips: expected more strips than programs"):
            inserted_pieces(strips, 4, 3)


def test_a_schedule_past_the_planes_or_without_the_accelerator_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from samu_kernels import strip_probe  # noqa: PLC0415

    x = torch.zeros(32, 80)
    past = Schedule("past", whole_strips(range(5), 4), 80, 16, 16, 2, 1, False)
    with pytest.raises(
        ValueError, match=r"x: the schedule 'past' streams 4 tiles of 16 rows, x has 2"
    ):
        stream_schedule(past, x, x, x)
    monkeypatch.setattr(strip_probe, "tma_device", lambda device: False)
    boxes = Schedule("boxes", whole_strips(range(5), 2), 80, 16, 16, 2, 1, True)
    with pytest.raises(ValueError, match="schedule: 'boxes' loads through the Tensor Memory"):
        stream_schedule(boxes, x, x, x)


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
    subset = Schedule("t", whole_strips(range(3), 4), 80, 16, 16, 2, 1, False)
    assert probe_bytes(subset, 64) == 3 * (3 * 4) * 16 * 16 * 2


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
        (["--table", "rows"], "--table: invalid choice: 'rows'"),
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
