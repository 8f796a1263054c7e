"""The launch geometry: heuristic tiles on the reference shapes and the override."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest
import torch

from samu_kernels.backends import DEFAULT_BACKENDS, REFERENCE_FILE_ROWS, parse_backend
from samu_kernels.benchmark import REFERENCE_SHAPES
from samu_kernels.common import launch
from samu_kernels.common.geometry import (
    BLOCK_PIECES,
    HIERARCHICAL_UNROLL,
    HIERARCHICAL_WARPS_PER_SM,
    LOOKBACK_RUNS,
    SEQUENTIAL_PREFETCH,
    SPLIT_ELEMENTS_PER_THREAD,
    TILE_ENV,
    TMA_STAGES,
    TMA_STAGES_ALONE,
    Tile,
    balanced_programs,
    block_pieces,
    choose_tile,
    format_tile,
    heuristic_tile,
    one_program_per_sm,
    parse_tile_override,
    persistent_pieces,
    set_tile_override,
    tile_override_kept,
)
from samu_kernels.controllers import FUSED_COORDS_CONTROLLER
from samu_kernels.sweep_grid import MAX_GEOMETRIES, sweep_tiles

H200_SMS = 132
REFERENCE = list(REFERENCE_SHAPES.values())


@pytest.mark.parametrize("shape", REFERENCE)
@pytest.mark.parametrize("chunk", [16, 32])
@pytest.mark.parametrize("hierarchical", [False, True])
def test_heuristic_tiles_are_one_warp_and_fill_the_gpu(
    shape: tuple[int, int, int], chunk: int, hierarchical: bool
) -> None:
    batch, length, width = shape
    tile = heuristic_tile(
        batch, length, width, chunk, hierarchical=hierarchical, multiprocessors=H200_SMS
    )
    assert (tile.num_warps, tile.backward_warps) == (1, 1)
    channel_programs = batch * -(-width // tile.block_r)
    if hierarchical:
        n_chunks = math.ceil(length / chunk)
        runs = math.ceil(n_chunks / tile.chunks_per_program)
        assert channel_programs * runs >= HIERARCHICAL_WARPS_PER_SM * H200_SMS
        assert tile.unroll == HIERARCHICAL_UNROLL
        assert tile.block_r in (32, 64)
        assert tile.split == 0
    else:
        # Time-split programs; 16 channels when 32 leave SMs without one; whole chunks per
        # tile, SPLIT_ELEMENTS_PER_THREAD elements per thread.
        assert tile.chunks_per_program == 1
        filled = batch * -(-width // 32) >= H200_SMS
        assert tile.block_r == (32 if filled else 16)
        assert tile.tile_rows % chunk == 0
        assert tile.tile_rows * tile.block_r == SPLIT_ELEMENTS_PER_THREAD * 32 * tile.split


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        # (block_r, split, tile_rows): the fastest SAMU geometries of the H200 run of
        # 2026-12-04 with tiles as rows (16 elements per thread).
        ((4, 2048, 2048), (32, 4, 64)),  # 256 programs: two per SM, 4 warps each
        ((1, 8192, 2560), (16, 4, 128)),  # 160 programs: more than SMs, 4 warps each
        ((1, 32768, 2048), (16, 8, 256)),  # 128 programs: one per SM, 8 warps each
    ],
)
def test_sequential_tiles_of_the_reference_shapes(
    shape: tuple[int, int, int], expected: tuple[int, int, int]
) -> None:
    tile = heuristic_tile(*shape, 32, hierarchical=False, multiprocessors=H200_SMS)
    assert (tile.block_r, tile.split, tile.tile_rows) == expected


@pytest.mark.parametrize(
    ("shape", "forward_split"),
    [((4, 2048, 2048), 8), ((1, 8192, 2560), 8), ((1, 32768, 2048), 0)],
)
def test_samu_forwards_take_twice_the_warps_where_the_backward_takes_four(
    shape: tuple[int, int, int], forward_split: int
) -> None:
    # H100 A/B of 2026-12-05: 0.98x / 0.99x on the short / medium shapes (the long shape's
    # programs have an SM each, on 8 warps); RG-LRU's gates keep the backward's warps.
    samu = heuristic_tile(*shape, 32, hierarchical=False, multiprocessors=132, tma_loads=True)
    assert samu.forward_split == forward_split
    assert heuristic_tile(*shape, 16, hierarchical=False, multiprocessors=132).forward_split == 0


def test_long_chunks_get_a_tile_each() -> None:
    tile = heuristic_tile(1, 32768, 2048, 256, hierarchical=False, multiprocessors=H200_SMS)
    assert (tile.tile_rows, tile.split) == (256, 8)  # one chunk, 32 rows per warp
    # 32-channel programs hold 16 rows per warp: a chunk of 256 takes 16 warps.
    tile = heuristic_tile(4, 2048, 2048, 256, hierarchical=False, multiprocessors=H200_SMS)
    assert (tile.block_r, tile.tile_rows, tile.split) == (32, 256, 16)


def test_heuristic_handles_tiny_problems() -> None:
    tile = heuristic_tile(1, 1, 1, 256, hierarchical=True, multiprocessors=4)
    assert tile == Tile(16, 1, 1, 1, 1, HIERARCHICAL_UNROLL)
    assert heuristic_tile(1, 1, 1, 4, hierarchical=False, multiprocessors=4).unroll == 4


@pytest.mark.parametrize(
    ("shape", "chunk", "runs_of"),
    [
        ((4, 2048, 2048), 16, 3),
        ((4, 2048, 2048), 32, 1),
        ((1, 8192, 2560), 16, 4),
        ((1, 8192, 2560), 32, 2),
        ((1, 32768, 2048), 16, 4),
        ((1, 32768, 2048), 32, 4),
    ],
)
def test_hierarchical_heuristic_picks_the_sweeps_best_geometries(
    shape: tuple[int, int, int], chunk: int, runs_of: int
) -> None:
    # The geometries of the H200 device-time sweeps (2026-12-03: 8 unrolled rows, one warp;
    # 2026-12-06: runs half as long for passes heavy in registers; docs/performance.md): a
    # change here needs a sweep.
    tile = heuristic_tile(*shape, chunk, hierarchical=True, multiprocessors=H200_SMS)
    assert (tile.block_r, tile.unroll, tile.chunks_per_program) == (32, 8, runs_of)


@pytest.mark.parametrize(
    ("shape", "runs_of"), [((4, 2048, 2048), 7), ((1, 8192, 2560), 9), ((1, 32768, 2048), 16)]
)
def test_light_passes_take_two_channels_per_thread_on_the_same_runs_up_to_twice_the_cap(
    shape: tuple[int, int, int], runs_of: int
) -> None:
    # The RG-LRU default (fused gates, chunk16) at the best two-channel geometries: runs
    # twice as long took 1.24 / 1.21x the time on the short and medium shapes, and runs of 8
    # chunks 1.005 / 1.02x that of 16 on the long one (H200 / H100, 2026-12-06).
    tile = heuristic_tile(
        *shape, 16, hierarchical=True, multiprocessors=H200_SMS, light_passes=True
    )
    assert (tile.block_r, tile.unroll, tile.chunks_per_program) == (64, 8, runs_of)
    sequential = heuristic_tile(
        *shape, 16, hierarchical=False, multiprocessors=H200_SMS, light_passes=True
    )
    assert sequential == heuristic_tile(*shape, 16, hierarchical=False, multiprocessors=H200_SMS)


def test_light_passes_keep_one_row_for_narrow_problems() -> None:
    narrow = heuristic_tile(2, 37, 19, 16, hierarchical=True, multiprocessors=4, light_passes=True)
    assert narrow.block_r == 32
    wide = heuristic_tile(1, 50, 70, 16, hierarchical=True, multiprocessors=4, light_passes=True)
    assert (wide.block_r, wide.chunks_per_program) == (64, 1)


def test_override_replaces_the_given_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    base = heuristic_tile(4, 2048, 2048, 32, hierarchical=True, multiprocessors=H200_SMS)
    monkeypatch.setenv(TILE_ENV, " block_r=32, stages=2 ,")
    tile = choose_tile(4, 2048, 2048, 32, hierarchical=True, multiprocessors=H200_SMS)
    assert (tile.block_r, tile.num_stages) == (32, 2)
    assert tile.chunks_per_program == base.chunks_per_program
    assert parse_tile_override(format_tile(tile)) == {
        "block_r": 32,
        "num_warps": tile.num_warps,
        "backward_warps": tile.backward_warps,
        "num_stages": 2,
        "chunks_per_program": tile.chunks_per_program,
        "unroll": tile.unroll,
        "chained": 0,
        "prefetch": 0,
        "split": 0,
        "tile_rows": 0,
        "forward_split": 0,
        "lookback": 0,
        "tma": 0,
        "channels": 0,
        "programs": 0,
        "pieces": 0,
    }


@pytest.mark.parametrize(("forward_warps", "warps", "rows"), [(True, 8, 256), (False, 4, 128)])
def test_the_forward_may_take_its_own_warps(
    forward_warps: bool, warps: int, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fwd_split: the forward's programs get twice the warps on tiles twice as long (the same
    # 16 elements per thread); the backward keeps split and tile_rows.
    monkeypatch.setenv(TILE_ENV, "block_r=16,split=4,tile_rows=128,fwd_split=8")
    config = _samu_default_config()
    u = torch.empty(1, 1024, 64, dtype=torch.bfloat16)
    flags = launch._Geometry.of(u, config).split_flags(
        config, has_resets=False, dtype=u.dtype, forward_warps=forward_warps
    )
    assert (flags["num_warps"], flags["TILE"], flags["SEGMENTS"]) == (warps, rows, warps * 2)


@pytest.mark.parametrize(
    ("tile", "expected"),
    [
        # Half the warps on half the tile: segments of 8 rows in both directions.
        ("block_r=16,split=4,tile_rows=64,fwd_split=2", (2, 32, 4)),
        ("block_r=16,split=4,tile_rows=0,fwd_split=8", (8, 64, 16)),  # the chunk's tile
    ],
)
def test_the_forward_keeps_the_backwards_segments(
    tile: str, expected: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Segments of the backward's rows make the forward's states the backward's, bit for bit.
    monkeypatch.setenv(TILE_ENV, tile)
    geometry = launch._Geometry.of(torch.empty(1, 1024, 64), _samu_default_config())
    assert geometry.split_layout(_samu_default_config(), forward_warps=True) == expected


def test_a_forward_tile_shorter_than_the_chunk_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fwd_split=2 of split=4 would halve the chunk's 32 rows: segments of other lengths.
    monkeypatch.setenv(TILE_ENV, "block_r=16,split=4,tile_rows=32,fwd_split=2")
    config = _samu_default_config()
    geometry = launch._Geometry.of(torch.empty(1, 1024, 64), config)
    assert geometry.split_layout(config, forward_warps=False) == (4, 32, 8)
    with pytest.raises(ValueError, match=rf"{TILE_ENV}: fwd_split=2 .* raise fwd_split"):
        geometry.split_layout(config, forward_warps=True)


def _samu_default_config() -> launch.ScanConfig:
    return launch.scan_config(
        parse_backend(DEFAULT_BACKENDS["samu"]), launch.GateMode.SAMU, launch.OutMode.Y_H_SKIP
    )


def test_chained_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    assert heuristic_tile(4, 2048, 2048, 16, hierarchical=True, multiprocessors=132).chained == 0
    monkeypatch.setenv(TILE_ENV, "chained=1")
    assert choose_tile(4, 2048, 2048, 16, hierarchical=True, multiprocessors=132).chained == 1


def test_lookback_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # Measured slower than the three passes on the H200: opt-in.
    tile = heuristic_tile(1, 8192, 2560, 32, hierarchical=True, multiprocessors=H200_SMS)
    assert (tile.lookback, tile.split) == (0, 0)
    monkeypatch.setenv(TILE_ENV, "lookback=2")
    asked = choose_tile(1, 8192, 2560, 32, hierarchical=True, multiprocessors=H200_SMS)
    assert asked.lookback == LOOKBACK_RUNS


def test_tma_loads_are_the_heuristics_for_samu_time_split_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Timed faster for SAMU's fused gates, not for RG-LRU's: asked for by the launcher there.
    # A program alone on its SM (the long shape's 128 blocks) keeps one more tile in flight.
    for shape, hierarchical, expected in (
        ((1, 32768, 2048), False, TMA_STAGES_ALONE),
        ((1, 8192, 2560), False, TMA_STAGES),
        ((4, 2048, 2048), False, TMA_STAGES),
        ((1, 32768, 2048), True, 0),
    ):
        tile = heuristic_tile(
            *shape, 32, hierarchical=hierarchical, multiprocessors=132, tma_loads=True
        )
        assert tile.tma == expected, shape
    assert heuristic_tile(1, 32768, 2048, 32, hierarchical=False, multiprocessors=132).tma == 0
    monkeypatch.setenv(TILE_ENV, "tma=0")
    asked = choose_tile(1, 32768, 2048, 32, hierarchical=False, multiprocessors=132, tma_loads=True)
    assert asked.tma == 0


def test_only_the_sequential_kernels_prefetch_by_default() -> None:
    for hierarchical, expected in ((False, SEQUENTIAL_PREFETCH), (True, 0)):
        tile = heuristic_tile(4, 2048, 2048, 32, hierarchical=hierarchical, multiprocessors=132)
        assert tile.prefetch == expected


def test_prefetch_distance_comes_from_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TILE_ENV, "prefetch=2")
    assert choose_tile(4, 2048, 2048, 16, hierarchical=True, multiprocessors=132).prefetch == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("block=64", "keys"),
        ("block_r", "keys"),
        ("block_r=48", "power of two"),
        ("block_r=8", "power of two >= 16"),
        ("channels=-1", "channels must be >= 0"),
        ("warps=3", "power of two"),
        ("stages=0", ">= 1"),
        ("chunks=x", "integer"),
        ("unroll=3", "power of two"),
        ("chained=2", "0 or 1"),
        ("chained=-1", "0 or 1"),
        ("lookback=3", "0 or 2"),
        ("lookback=1", "0 or 2"),  # the per-tile look-back form, removed
        ("prefetch=-1", ">= 0"),
        ("split=3", "0 or a power of two"),
        ("split=64", "0 or a power of two"),
        ("fwd_split=6", "fwd_split must be 0 or a power of two"),
        ("tile_rows=24", "0 or a power of two"),
        ("tma=1", "0 (pointer loads) or 2..8"),
        ("tma=9", "0 (pointer loads) or 2..8"),
    ],
)
def test_bad_override_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=TILE_ENV) as error:
        parse_tile_override(text)
    assert message in str(error.value)


def test_one_program_per_sm_only_where_sixteen_channels_load_some_sms_twice() -> None:
    short, medium, long = REFERENCE_SHAPES.values()
    base = heuristic_tile(*medium, 32, hierarchical=False, multiprocessors=H200_SMS, tma_loads=True)
    tile = one_program_per_sm(base, medium[0], medium[2], 32, multiprocessors=H200_SMS)
    assert tile is not None
    assert (tile.channels, tile.block_r, tile.split, tile.tile_rows) == (24, 32, 8, 128)
    assert (tile.forward_split, tile.tma) == (0, base.tma)
    assert -(-medium[2] // tile.channels) <= H200_SMS  # 107 programs
    for batch, _length, width in (short, long):
        assert one_program_per_sm(base, batch, width, 32, multiprocessors=H200_SMS) is None
    sweep = sweep_tiles(DEFAULT_BACKENDS["samu"], medium, H200_SMS, tma_loads=True)
    assert sweep[0] == base
    assert tile in sweep
    # RG-LRU's fused gates start at the even grid and keep the 16-channel programs beside it.
    rglru = sweep_tiles("fused_shared_sfu_chunk16", medium, H200_SMS)
    assert rglru[0].channels == 24
    assert heuristic_tile(*medium, 16, hierarchical=False, multiprocessors=H200_SMS) in rglru
    assert all(tile.channels <= tile.block_r for tile in rglru)


def test_balanced_programs_only_where_blocks_load_some_sms_twice() -> None:
    # The medium shape's 160 blocks of 16 channels as one 8-warp program per SM (1.21 blocks
    # each); the short shape's 512 blocks and the long one's 128 get none. The sweep holds
    # it beside the heuristic's whole-block programs.
    short, medium, long = REFERENCE_SHAPES.values()
    base = heuristic_tile(*medium, 32, hierarchical=False, multiprocessors=H200_SMS, tma_loads=True)
    tile = balanced_programs(base, medium[0], medium[2], 32, multiprocessors=H200_SMS)
    assert tile is not None
    assert (tile.programs, tile.block_r, tile.channels) == (H200_SMS, 16, 0)
    assert (tile.split, tile.tile_rows, tile.forward_split, tile.tma) == (8, 256, 0, base.tma)
    for batch, _length, width in (short, long):
        assert balanced_programs(base, batch, width, 32, multiprocessors=H200_SMS) is None
    sweep = sweep_tiles(DEFAULT_BACKENDS["samu"], medium, H200_SMS, tma_loads=True)
    assert sweep[0] == base
    assert tile in sweep


def test_block_pieces_where_balanced_programs_would_be() -> None:
    # The balanced programs' warps and tiles, every block cut into pieces instead of shares.
    short, medium, long = REFERENCE_SHAPES.values()
    base = heuristic_tile(*medium, 32, hierarchical=False, multiprocessors=H200_SMS, tma_loads=True)
    tile = block_pieces(base, medium[0], medium[2], 32, multiprocessors=H200_SMS)
    balanced = balanced_programs(base, medium[0], medium[2], 32, multiprocessors=H200_SMS)
    assert tile == replace(balanced, programs=0, pieces=BLOCK_PIECES)
    for batch, _length, width in (short, long):
        assert block_pieces(base, batch, width, 32, multiprocessors=H200_SMS) is None
    assert tile in sweep_tiles(DEFAULT_BACKENDS["samu"], medium, H200_SMS, tma_loads=True)


def test_persistent_pieces_where_block_pieces_would_be() -> None:
    # The block pieces on one persistent program per SM, four tiles in flight as programs
    # alone on their SMs take them.
    short, medium, long = REFERENCE_SHAPES.values()
    base = heuristic_tile(*medium, 32, hierarchical=False, multiprocessors=H200_SMS, tma_loads=True)
    tile = persistent_pieces(base, medium[0], medium[2], 32, multiprocessors=H200_SMS)
    pieces = block_pieces(base, medium[0], medium[2], 32, multiprocessors=H200_SMS)
    assert tile == replace(pieces, programs=H200_SMS, tma=TMA_STAGES_ALONE)
    for batch, _length, width in (short, long):
        assert persistent_pieces(base, batch, width, 32, multiprocessors=H200_SMS) is None
    assert tile in sweep_tiles(DEFAULT_BACKENDS["samu"], medium, H200_SMS, tma_loads=True)


def test_an_even_grid_recuts_only_the_time_split_programs_it_evens_out() -> None:
    # RG-LRU's fused gates (even_grid): the medium shape's 160 sixteen-channel programs
    # become 107 of 24 channels; the other reference shapes and the hierarchical passes
    # keep the heuristic's tiles.
    medium = REFERENCE_SHAPES["state2560_medium"]
    for shape in REFERENCE:
        for hierarchical in (False, True):
            plain = heuristic_tile(*shape, 16, hierarchical=hierarchical, multiprocessors=H200_SMS)
            even = heuristic_tile(
                *shape, 16, hierarchical=hierarchical, multiprocessors=H200_SMS, even_grid=True
            )
            if shape == medium and not hierarchical:
                assert even == one_program_per_sm(
                    plain, medium[0], medium[2], 16, multiprocessors=H200_SMS
                )
                assert (even.channels, even.block_r) == (24, 32)
            else:
                assert even == plain


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("", (32, 24)),
        ("block_r=16", (16, 0)),
        ("block_r=64,channels=40", (64, 40)),
        ("channels=0", (32, 0)),
    ],
)
def test_an_override_of_block_r_gives_programs_all_their_lanes(
    override: str, expected: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Channels the heuristic chose for its own block_r do not carry over to another one.
    monkeypatch.setenv(TILE_ENV, override)
    tile = choose_tile(
        1, 8192, 2560, 16, hierarchical=False, multiprocessors=H200_SMS, even_grid=True
    )
    assert (tile.block_r, tile.channels) == expected


@pytest.mark.parametrize(("architecture", "backend", "controller"), REFERENCE_FILE_ROWS)
@pytest.mark.parametrize("shape", REFERENCE)
def test_sweep_grid_is_small_and_starts_at_the_heuristic(
    architecture: str, backend: str, controller: str | None, shape: tuple[int, int, int]
) -> None:
    fused_gates = controller == FUSED_COORDS_CONTROLLER
    tiles = sweep_tiles(backend, shape, H200_SMS, tma_loads=fused_gates)
    assert 4 <= len(tiles) <= MAX_GEOMETRIES
    assert len(set(tiles)) == len(tiles)
    spec = parse_backend(backend)
    assert spec.chunk is not None
    assert tiles[0] == heuristic_tile(
        *shape,
        spec.chunk,
        hierarchical=spec.hierarchical,
        multiprocessors=H200_SMS,
        light_passes=spec.fused,
        tma_loads=fused_gates,
        even_grid=spec.fused,
    )
    if not spec.hierarchical:  # the time-split neighbours keep the default's kind of loads
        assert all((tile.tma > 0) == (tiles[0].tma > 0) for tile in tiles)
        assert any(tile.split == 0 for tile in tiles)  # and the row walk is among them


@pytest.mark.parametrize("entering", ["", "split=8"])
def test_the_tile_variable_is_put_back_as_it_was_even_after_an_error(
    monkeypatch: pytest.MonkeyPatch, entering: str
) -> None:
    monkeypatch.delenv(TILE_ENV, raising=False)  # the test's own changes are undone after it
    set_tile_override(entering)

    def failing_body() -> None:
        with tile_override_kept():
            set_tile_override("programs=4")
            assert os.environ[TILE_ENV] == "programs=4"
            set_tile_override("")
            assert TILE_ENV not in os.environ
            set_tile_override("block_r=32")
            raise KeyError("the body failed")

    with pytest.raises(KeyError):
        failing_body()
    assert os.environ.get(TILE_ENV, "") == entering
