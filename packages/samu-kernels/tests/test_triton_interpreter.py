"""Triton backends against the float64 reference: forward output, final state and every
gradient, on odd shapes with resets and an initial state, NaN-poisoned buffers.

On CPU these run under TRITON_INTERPRET=1 on a representative sample of backends (the full
matrix runs on the GPU in test_gpu.py).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from kernel_cases import (
    assert_matches_reference,
    assert_tma_loads_agree,
    make_problem,
    record_tile_loads,
    run,
    saturate,
)
from torch._subclasses.fake_tensor import FakeTensorMode

import samu_kernels
from samu_kernels.backends import REFERENCE_FILE_ROWS
from samu_kernels.common import launch
from samu_kernels.common.chunk import (
    SFU_TANH_SIGMOIDS,
    _one_minus_exp2_twice,
    _one_minus_exp2_twice_short,
)
from samu_kernels.common.geometry import TILE_ENV, Tile, choose_tile
from samu_kernels.common.launch import tma_loadable
from samu_kernels.common.persistent import first_step, next_step, persistent_tile
from samu_kernels.common.summaries import publish_carry, wait_for_carry

SHAPE = (2, 37, 19)  # L not a multiple of any chunk, R not a multiple of any channel block
WIDE = (1, 50, 70)
# L a multiple of every chunk and R of every channel block: the kernels drop their row and
# column masks (FULL_CHUNKS, a constant column mask), so the edges of the tensors are the
# check.
EVEN = (1, 64, 64)

CASES = [
    # (architecture, backend, controller, shape, resets, h0)
    ("rglru", samu_kernels.DEFAULT_BACKENDS["rglru"], None, SHAPE, True, True),
    # Two channels per thread (64-wide programs over 70 channels) and runs of two chunks:
    ("rglru", samu_kernels.DEFAULT_BACKENDS["rglru"], None, WIDE, True, True),
    ("rglru", "fused_fused_output_fused_write_shared_sfu_chunk8", None, SHAPE, True, True),
    ("rglru", "chunk16", None, SHAPE, True, False),
    ("rglru", "fused_output_grouped_prefix2_hierarchical_chunk8", None, WIDE, True, True),
    ("rglru", "fused_shared_sfu_hierarchical_chunk32", None, SHAPE, False, True),
    ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", SHAPE, True, True),
    ("samu", samu_kernels.REFERENCE_FILE_ROWS[2][1], "fp32_fused_coords", SHAPE, True, True),
    ("samu", "chunk16", "fp32_fused_coords", WIDE, True, False),
    (
        "samu",
        "shared_sfu_grouped_prefix4_hierarchical_chunk8",
        "fp32_fused_coords",
        SHAPE,
        False,
        True,
    ),
    ("samu", "hierarchical_chunk8", "reference", SHAPE, True, True),
    # The hierarchical passes' skip gradient alone (precomputed gates, y*(h + skip*u)):
    ("samu", "fused_output_hierarchical_chunk8", "reference", SHAPE, True, True),
    ("samu", "fused_output_fused_write_chunk16", "reference", WIDE, True, True),
    ("rglru", samu_kernels.DEFAULT_BACKENDS["rglru"], None, EVEN, True, True),
    ("rglru", "fused_fused_output_fused_write_shared_sfu_chunk8", None, EVEN, False, True),
    ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", EVEN, True, False),
    ("samu", samu_kernels.REFERENCE_FILE_ROWS[2][1], "fp32_fused_coords", EVEN, True, True),
]


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(("architecture", "backend", "controller", "shape", "resets", "h0"), CASES)
def test_backend_matches_reference_float32(
    architecture: str,
    backend: str,
    controller: str | None,
    shape: tuple[int, int, int],
    resets: bool,
    h0: bool,
    device: torch.device,
) -> None:
    problem = make_problem(architecture, shape, torch.float32, device, resets=resets, h0=h0)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_default_backend_matches_reference_bfloat16(
    architecture: str, device: torch.device
) -> None:
    problem = make_problem(architecture, SHAPE, torch.bfloat16, device, resets=True, h0=True)
    controller = None if architecture == "rglru" else "fp32_fused_coords"
    got = assert_matches_reference(problem, samu_kernels.DEFAULT_BACKENDS[architecture], controller)
    assert got["output"].dtype == torch.bfloat16
    assert got["final_state"].dtype == torch.float32
    assert got["grad_u"].dtype == torch.bfloat16


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("shape", "backend"),
    [((3, 1, 5), "fused_output_chunk8"), ((2, 5, 13), "grouped_prefix2_hierarchical_chunk16")],
)
def test_sequences_shorter_than_a_chunk(
    shape: tuple[int, int, int], backend: str, device: torch.device
) -> None:
    problem = make_problem("samu", shape, torch.float32, device, resets=False, h0=True)
    assert_matches_reference(problem, backend, "fp32_fused_coords")


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp2:RuntimeWarning")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"),
    [
        # shared_sfu names: without it 1 - a^2 is 1 - exp(2 log_a) as written, which cancels
        # as a -> 1 (relative errors of 2-5e-5 on these inputs, docs/kernels.md).
        ("rglru", "fused_shared_sfu_grouped_prefix32_hierarchical_chunk16", None),
        ("rglru", "fused_fused_output_fused_write_shared_sfu_chunk8", None),
        ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords"),
    ],
)
def test_saturated_gates(
    architecture: str, backend: str, controller: str | None, device: torch.device
) -> None:
    problem = make_problem(architecture, SHAPE, torch.float32, device, resets=True, h0=True)
    saturate(problem)
    got = assert_matches_reference(problem, backend, controller)
    assert all(bool(torch.isfinite(value).all()) for value in got.values())


def record_shared_sfu(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets, for every time-split launch from now on, its SHARED_SFU flag."""
    flags: list[int] = []
    original = launch._Geometry.split_flags

    def recording(self: launch._Geometry, *args: Any, **kwargs: Any) -> dict[str, Any]:
        result = original(self, *args, **kwargs)
        flags.append(result["SHARED_SFU"])
        return result

    monkeypatch.setattr(launch._Geometry, "split_flags", recording)
    return flags


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller", "saturated"),
    [
        ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", False),
        ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", True),
        ("rglru", "fused_fused_output_fused_write_shared_sfu_chunk8", None, False),
    ],
)
def test_tanh_sigmoids_match_reference_bfloat16(
    architecture: str,
    backend: str,
    controller: str | None,
    saturated: bool,
    monkeypatch: pytest.MonkeyPatch,
    device: torch.device,
) -> None:
    # The 16-bit inputs' gate form of the time-split kernels (SFU_TANH_SIGMOIDS: tanh
    # sigmoids with their constants folded, the short polynomial for 1 - a^2); on the CPU
    # chunk.tanh_approx is an exact tanh, so this checks the algebra, the GPU its accuracy.
    monkeypatch.setattr(launch, "TANH_SIGMOID", True)
    flags = record_shared_sfu(monkeypatch)
    problem = make_problem(architecture, SHAPE, torch.bfloat16, device, resets=True, h0=True)
    if saturated:
        saturate(problem)
    got = assert_matches_reference(problem, backend, controller)
    assert all(bool(torch.isfinite(value).all()) for value in got.values())
    assert len(flags) >= 2  # the forward's launch (asked twice with pointer loads), the backward's
    assert all(flag == SFU_TANH_SIGMOIDS for flag in flags)


@triton.jit
def _one_minus_a2_kernel(T, OUT, N: tl.constexpr, SHORT: tl.constexpr):
    t = tl.load(T + tl.arange(0, N))
    if SHORT:
        value = _one_minus_exp2_twice_short(t, tl.exp2(t))
    else:
        value = _one_minus_exp2_twice(t, tl.exp2(t))
    tl.store(OUT + tl.arange(0, N), value)


@pytest.mark.parametrize(("short", "bound"), [(False, 1.5e-6), (True, 6e-6)])
def test_one_minus_a_squared_is_accurate_near_one(
    short: bool, bound: float, device: torch.device
) -> None:
    # 1 - a^2 for a = 2^t: the polynomial near t = 0 (where 1 - a*a cancels), 1 - a*a beyond
    # it; the long form for fp32 inputs, the short one for 16-bit inputs (chunk.py).
    n = 1024
    log2_a = -torch.logspace(-9, 1, n, dtype=torch.float64)
    out = torch.full((n,), float("nan"), device=device)
    _one_minus_a2_kernel[(1,)](log2_a.float().to(device), out, N=n, SHORT=short)
    exact = -torch.expm1(2 * math.log(2) * log2_a.float().double())
    relative = ((out.double().cpu() - exact).abs() / exact).max().item()
    assert relative <= bound


@triton.jit
def _carry_round_trip_kernel(VALUES, CARRY, OUT, PUBLISHED: tl.constexpr, N: tl.constexpr):
    k = tl.arange(0, N)
    publish_carry(CARRY + k, tl.load(VALUES + k), k < PUBLISHED)
    tl.store(OUT + k, wait_for_carry(CARRY + k, k < PUBLISHED))


def test_carry_words_hold_every_value_and_their_flag(device: torch.device) -> None:
    # The time-split programs' carries (summaries.publish_carry / wait_for_carry): the fp32
    # bits below a raised flag, read back bit for bit (signs, zeros, infinities, subnormals,
    # NaN); lanes outside the mask neither published nor read (zeros).
    values = torch.tensor(
        [-1.5, -0.0, 0.0, float("inf"), -float("inf"), 1e-45, -3.4e38, float("nan")] + [0.25] * 8
    )
    n, published = values.numel(), 12
    carry = torch.zeros(n, dtype=torch.int64, device=device)
    out = torch.full((n,), float("nan"), device=device)
    _carry_round_trip_kernel[(1,)](values.to(device), carry, out, PUBLISHED=published, N=n)
    bits = values.view(torch.int32).long() & 0xFFFFFFFF
    assert torch.equal(carry.cpu()[:published], bits[:published] | (1 << 32))
    assert not carry.cpu()[published:].any()
    assert torch.equal(
        out.cpu().view(torch.int32)[:published], values.view(torch.int32)[:published]
    )
    assert not out.cpu()[published:].any()


@triton.jit
def _persistent_steps_kernel(OUT, steps, tiles_per_piece, n_blocks, n_pieces,
                             BACKWARD: tl.constexpr):  # fmt: skip
    block, rank, within, blocks_on, ranks_on = first_step(n_blocks)
    row = OUT + tl.program_id(0) * steps * 3
    for step in range(steps):
        piece, tile = persistent_tile(rank, within, tiles_per_piece, n_pieces, BACKWARD)
        tl.store(row + step * 3, block)
        tl.store(row + step * 3 + 1, piece)
        tl.store(row + step * 3 + 2, tile)
        block, rank, within = next_step(
            block, rank, within, tiles_per_piece, n_blocks, blocks_on, ranks_on
        )


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize(("programs", "n_blocks"), [(3, 7), (4, 4), (9, 4), (1, 5)])
def test_persistent_counters_follow_the_piece_major_order(
    programs: int, n_blocks: int, backward: bool, device: torch.device
) -> None:
    # The persistent loop's counters (no division per step) visit, step by step, what the
    # order defines: program p's j-th item is p + j * programs, piece-major (block fastest),
    # the backward's pieces from the last and its tiles from each piece's last.
    n_pieces, tiles_per_piece = 3, 2
    steps = -(-n_pieces * n_blocks // programs) * tiles_per_piece
    out = torch.full((programs, steps, 3), -1, dtype=torch.int32, device=device)
    _persistent_steps_kernel[(programs,)](
        out, steps, tiles_per_piece, n_blocks, n_pieces, BACKWARD=backward
    )
    for p in range(programs):
        for step in range(steps):
            item = p + step // tiles_per_piece * programs
            within = step % tiles_per_piece
            rank, block = divmod(item, n_blocks)
            piece = n_pieces - 1 - rank if backward else rank
            last = tiles_per_piece - 1
            tile = piece * tiles_per_piece + (last - within if backward else within)
            assert out[p, step].tolist() == [block, piece, tile], (p, step)


CHAINED = "block_r=16,chunks=2,chained=1,lookback=0"


def runs_of(chunks: int) -> str:
    """A two-warp, two-stage geometry of 16-channel blocks and runs of ``chunks`` chunks
    (the three hierarchical passes, also for names with ``grouped_prefix``)."""
    return f"block_r=16,warps=2,bwd_warps=2,stages=2,chunks={chunks},lookback=0"


def runs_looking_back(chunks: int) -> str:
    """The chained kernels with a look-back over run summaries (runs of ``chunks`` chunks,
    16-channel blocks)."""
    return f"block_r=16,chunks={chunks},lookback=2"


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller", "tile"),
    [
        # 5 chunks of 8: runs of 2, 2, 1 (a short last run), two channel blocks of 16.
        (
            "samu",
            "fused_output_grouped_prefix2_hierarchical_chunk8",
            "fp32_fused_coords",
            runs_of(2),
        ),
        ("samu", REFERENCE_FILE_ROWS[2][1], "fp32_fused_coords", runs_of(3)),
        (
            "rglru",
            "fused_fused_output_fused_write_grouped_prefix2_hierarchical_chunk8",
            None,
            runs_of(4),
        ),
        ("samu", "fused_output_fused_write_chunk8", "reference", runs_of(2)),
        # The one-pass chained passes: 3 runs of chunk8 chained through flags, forward and
        # backward (one run of chunk32).
        ("samu", REFERENCE_FILE_ROWS[2][1], "fp32_fused_coords", CHAINED),
        (
            "rglru",
            "fused_fused_output_fused_write_grouped_prefix2_hierarchical_chunk8",
            None,
            CHAINED,
        ),
        ("samu", "hierarchical_chunk8", "reference", CHAINED),
        # The chained kernels looking back over run summaries: 5 runs of one chunk in groups
        # of 2; 3 runs of two chunks (the last one short); a name without grouped_prefix,
        # which keeps the three passes.
        (
            "samu",
            "fused_output_grouped_prefix2_hierarchical_chunk8",
            "fp32_fused_coords",
            runs_looking_back(1),
        ),
        (
            "rglru",
            "fused_fused_output_fused_write_grouped_prefix2_hierarchical_chunk8",
            None,
            runs_looking_back(2),
        ),
        ("samu", "hierarchical_chunk8", "reference", runs_looking_back(1)),
        # Time-split sequential kernels: one row per segment (a one-chunk tile); one warp per
        # program over two channel blocks; tiles of two and four chunks, the last one short
        # (37 rows: tiles of 16, 16, 5 and of 32, 5), checkpoints and saved states; and the
        # one-warp row walk they replace by default.
        ("rglru", "fused_fused_output_fused_write_chunk8", None, "split=8,tile_rows=8"),
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk16",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=16",
        ),
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=2,tile_rows=16,block_r=16",
        ),
        ("rglru", "fused_chunk8", None, "split=4,tile_rows=32"),
        # 16 rows per segment over chunks of 8: two checkpoints inside every segment.
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=32",
        ),
        # fwd_split where the tiles cannot come through the accelerator (unaligned fp32 rows,
        # tma=0): the forward keeps split's warps (the TMA layouts test runs fwd_split).
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=16,fwd_split=2",
        ),
        ("rglru", "fused_chunk8", None, "split=2,tile_rows=16,fwd_split=4"),
        # Programs owning fewer channels than their lanes: 19 channels as 7 + 7 + 5.
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=16,channels=7",
        ),
        ("rglru", "fused_chunk8", None, "split=2,tile_rows=16,channels=7"),
        ("samu", "fused_output_chunk8", "reference", "split=1,block_r=16,tile_rows=16,channels=7"),
        ("samu", "fused_output_fused_write_chunk8", "fp32_fused_coords", "split=0"),
        ("rglru", "fused_chunk8", None, "split=0"),
    ],
)
def test_geometry_override(
    architecture: str,
    backend: str,
    controller: str | None,
    tile: str,
    monkeypatch: pytest.MonkeyPatch,
    device: torch.device,
) -> None:
    monkeypatch.setenv(TILE_ENV, tile)
    problem = make_problem(architecture, (2, 37, 19), torch.float32, device, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
def test_the_fused_rglru_gates_even_the_grid_out(
    monkeypatch: pytest.MonkeyPatch, device: torch.device
) -> None:
    # WIDE on the interpreter's 4 multiprocessors: five 16-channel time-split programs would
    # load one twice, so the heuristic gives RG-LRU's fused gates three programs of 24
    # channels on 32 lanes (geometry.one_program_per_sm).
    tiles: list[Tile] = []

    def recording(*args: Any, **kwargs: Any) -> Tile:
        tiles.append(choose_tile(*args, **kwargs))
        return tiles[-1]

    monkeypatch.setattr(launch, "choose_tile", recording)
    problem = make_problem("rglru", WIDE, torch.float32, device, resets=True, h0=True)
    assert_matches_reference(problem, "fused_fused_output_fused_write_shared_sfu_chunk8", None)
    assert {(tile.block_r, tile.channels) for tile in tiles} == {(32, 24)}


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller", "tile"),
    [
        # [2, 37, 19] in 4 blocks of 16 channels and 5 tiles of 8 rows, on 3 programs: every
        # program cuts a block, forward and backward (whose shares count from the end).
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=8,programs=3",
        ),
        # The forward's own tiles (16 rows on 2 warps: 3 tiles) cut elsewhere than the
        # backward's; 24 programs for 4 blocks: one each, unbalanced.
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=8,fwd_split=2,programs=2",
        ),
        (
            "samu",
            "fused_output_fused_write_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=8,programs=24",
        ),
        # RG-LRU's fused gates without fused_write (saved states), 7-channel programs.
        ("rglru", "fused_chunk8", None, "split=2,tile_rows=8,channels=7,programs=5"),
        ("samu", "fused_output_chunk8", "reference", "split=1,block_r=16,tile_rows=8,programs=3"),
        # Block pieces of 2, 2 and 1 tiles: 12 programs, each piece's state (and gradient)
        # handed to the next; the forward's own tiles in 3 pieces of one.
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=8,fwd_split=2,pieces=3",
        ),
        # More pieces asked for than the blocks have tiles: one piece per tile.
        ("rglru", "fused_chunk8", None, "split=2,tile_rows=8,channels=7,pieces=9"),
        ("samu", "fused_output_chunk8", "reference", "split=1,block_r=16,tile_rows=8,pieces=2"),
        # Persistent programs (the interpreter runs programs one after another, so every
        # piece's predecessor is its own program's: programs divide the blocks). 2 programs
        # of 6 pieces each; the backward's last piece is one tile and one past the end.
        (
            "samu",
            "fused_output_fused_write_shared_sfu_chunk8",
            "fp32_fused_coords",
            "split=1,block_r=16,tile_rows=8,fwd_split=2,pieces=3,programs=2",
        ),
        # 3 programs for 6 blocks of 7 channels: 10 pieces each; saved states, pointer loads.
        ("rglru", "fused_chunk8", None, "split=2,tile_rows=8,channels=7,pieces=9,programs=3"),
        # One program scans every piece in piece-major order.
        (
            "samu",
            "fused_output_chunk8",
            "reference",
            "split=1,block_r=16,tile_rows=8,pieces=2,programs=1",
        ),
    ],
)
def test_cut_blocks_are_handed_over(
    architecture: str,
    backend: str,
    controller: str | None,
    tile: str,
    monkeypatch: pytest.MonkeyPatch,
    device: torch.device,
) -> None:
    monkeypatch.setenv(TILE_ENV, tile)
    problem = make_problem(architecture, (2, 37, 19), torch.float32, device, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.parametrize("cut", ["programs=3", "pieces=3", "pieces=3,programs=2"])
def test_cut_blocks_compute_the_whole_block_programs_states(
    cut: str, monkeypatch: pytest.MonkeyPatch, device: torch.device
) -> None:
    # A cut block's carry is the state the whole-block program reaches at the cut: output,
    # final state and input gradients bit for bit; the parameter gradients sum a partial
    # per share or piece.
    problem = make_problem("samu", (2, 37, 19), torch.float32, device, resets=True, h0=True)
    backend = "fused_output_fused_write_shared_sfu_chunk8"
    monkeypatch.setenv(TILE_ENV, "split=1,block_r=16,tile_rows=8")
    whole = run(problem, backend, "fp32_fused_coords")
    monkeypatch.setenv(TILE_ENV, f"split=1,block_r=16,tile_rows=8,{cut}")
    cut_blocks = run(problem, backend, "fp32_fused_coords")
    for name in ("output", "final_state", "grad_u", "grad_y", "grad_h0"):
        assert torch.equal(cut_blocks[name], whole[name]), name


@pytest.mark.usefixtures("poisoned_buffers")
def test_lookback_composes_several_blocks_of_summaries(
    monkeypatch: pytest.MonkeyPatch, device: torch.device
) -> None:
    # 8 runs of 8 rows in groups of 2: the last groups compose their earlier groups'
    # summaries two at a time (SCAN_ROWS = G = 2) in two blocks, forward and backward.
    monkeypatch.setenv(TILE_ENV, runs_looking_back(1))
    problem = make_problem("samu", (1, 61, 19), torch.float32, device, resets=True, h0=True)
    assert_matches_reference(
        problem, "fused_output_fused_write_grouped_prefix2_hierarchical_chunk8", "fp32_fused_coords"
    )


def test_backward_is_bitwise_deterministic(device: torch.device) -> None:
    problem = make_problem("samu", (2, 20, 19), torch.float32, device, resets=True, h0=True)
    backend = "fused_output_grouped_prefix2_hierarchical_chunk8"
    first = run(problem, backend, "fp32_fused_coords")
    second = run(problem, backend, "fp32_fused_coords")
    for name, value in first.items():
        assert torch.equal(value, second[name]), name


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "controller"), [("samu", "fp32_fused_coords"), ("rglru", None)]
)
def test_an_unused_final_state_is_a_zero_gradient(
    architecture: str, controller: str | None, device: torch.device
) -> None:
    # The launcher zeroes the final state's gradient together with the kernels' counters
    # when autograd gives none: the gradients are those of an explicit zero.
    problem = make_problem(architecture, (2, 20, 19), torch.float32, device, resets=True, h0=True)
    zero_final = replace(problem, grad_final=torch.zeros_like(problem.grad_final))
    backend = samu_kernels.DEFAULT_BACKENDS[architecture]
    unused = run(problem, backend, controller, final_state_in_loss=False)
    explicit = run(zero_final, backend, controller)
    for name, value in unused.items():
        assert torch.equal(value, explicit[name]), name


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"),
    [
        ("samu", "fused_output_fused_write_shared_sfu_chunk16", "fp32_fused_coords"),
        ("rglru", "fused_fused_output_grouped_prefix2_hierarchical_chunk16", None),
    ],
)
def test_chunks_longer_than_the_unrolled_rows(
    architecture: str,
    backend: str,
    controller: str | None,
    monkeypatch: pytest.MonkeyPatch,
    device: torch.device,
) -> None:
    # Chunks longer than the unrolled rows loop over blocks of them; 4 rows per block
    # exercises that path at interpreter speed (the row walk also for the sequential kernel).
    monkeypatch.setenv(TILE_ENV, "split=0,unroll=4")
    problem = make_problem(architecture, (2, 37, 19), torch.float32, device, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller", "shape", "resets"),
    [
        # Two 32-row tiles, the last one partial; 20 channels in blocks of 16.
        ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", (2, 48, 20), True),
        # RG-LRU's three inputs, the saved states through a box.
        ("rglru", "fused_shared_sfu_chunk8", None, (2, 48, 20), True),
    ],
)
def test_tiles_through_descriptors_equal_pointer_loads(
    architecture: str,
    backend: str,
    controller: str | None,
    shape: tuple[int, int, int],
    resets: bool,
    monkeypatch: pytest.MonkeyPatch,
    device: torch.device,
) -> None:
    # The interpreter emulates the Tensor Memory Accelerator's boxes, their zero padding
    # past L and R included.
    problem = make_problem(architecture, shape, torch.float32, device, resets=resets, h0=True)
    assert_tma_loads_agree(
        problem, backend, controller, "split=1,block_r=16,tile_rows=16", monkeypatch
    )


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    "tile",
    [
        # The forward on 2 warps and tiles of 64 rows through the accelerator, the backward on
        # 1 and 32: the same segments of 16 rows, so the same bits as the pointer loads'
        # forward on 1 warp.
        "split=1,block_r=16,tile_rows=16,fwd_split=2",
        # Programs of 12 channels on 16 lanes: boxes start 48 bytes apart, the last one
        # half past R.
        "split=1,block_r=16,tile_rows=16,channels=12",
        # Three blocks of 8, 8 and 4 channels (3 tiles of 32 rows each) on two balanced
        # programs: the middle block cut after its first tile.
        "split=1,block_r=16,tile_rows=16,channels=8,programs=2",
    ],
)
def test_time_split_layouts_through_the_tma_equal_pointer_loads(
    tile: str, monkeypatch: pytest.MonkeyPatch, device: torch.device
) -> None:
    problem = make_problem("samu", (1, 80, 20), torch.float32, device, resets=True, h0=True)
    assert_tma_loads_agree(
        problem, samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", tile, monkeypatch
    )


@pytest.mark.parametrize(
    ("backend", "tile", "message"),
    [
        # 128 rows of 16 channels on one warp: 64 elements (64 rows of one column) per thread.
        (
            "fused_output_fused_write_chunk8",
            "split=1,block_r=16,tile_rows=128",
            r"64 elements .*\(64 rows\); at most 32",
        ),
        ("fused_output_fused_write_chunk8", "split=0,channels=8", "needs time-split programs"),
        (
            "fused_output_fused_write_grouped_prefix4_hierarchical_chunk8",
            "channels=8",
            "needs time-split programs",
        ),
        ("fused_output_fused_write_chunk8", "split=1,block_r=16,channels=24", "exceeds"),
        ("fused_output_fused_write_chunk8", "split=0,programs=1", "needs time-split programs"),
        ("fused_output_fused_write_chunk8", "split=0,pieces=2", "needs time-split programs"),
        (
            "fused_output_fused_write_chunk8",
            "split=1,block_r=16,tile_rows=8,programs=5,pieces=2",
            "resident at once: at most 4",
        ),
        (
            "fused_output_fused_write_chunk8",
            "split=1,block_r=16,tile_rows=8,programs=3,pieces=3",
            "one after another.*dividing the 2 channel blocks",
        ),
    ],
)
def test_bad_time_split_geometries_are_refused(
    backend: str, tile: str, message: str, monkeypatch: pytest.MonkeyPatch, device: torch.device
) -> None:
    monkeypatch.setenv(TILE_ENV, tile)
    problem = make_problem("samu", (1, 24, 32), torch.float32, device, resets=False, h0=False)
    with pytest.raises(ValueError, match=rf"{TILE_ENV}.*{message}"):
        run(problem, backend, "fp32_fused_coords")


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("backend", "controller", "width", "channels"),
    [
        # fp32 rows of 76 bytes, not a multiple of the accelerator's 16.
        (samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", 19, 16),
        # Programs of 10 fp32 channels: boxes would start 40 bytes apart.
        (samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords", 20, 10),
        # Precomputed gates (launch._Geometry.tma_stages), u for the skip term, saved states.
        ("fused_output_chunk8", "reference", 20, 16),
    ],
)
def test_pointer_loads_where_the_tma_may_not_serve(
    backend: str,
    controller: str,
    width: int,
    channels: int,
    monkeypatch: pytest.MonkeyPatch,
    device: torch.device,
) -> None:
    described = record_tile_loads(monkeypatch)
    monkeypatch.setenv(TILE_ENV, f"split=1,block_r=16,tile_rows=16,channels={channels},tma=3")
    problem = make_problem("samu", (1, 24, width), torch.float32, device, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)
    assert described == [False, False]


@pytest.mark.parametrize(
    ("shape", "dtype", "offset", "rows", "loadable"),
    [
        ((2, 48, 20), torch.float32, 0, 32, True),
        ((2, 48, 19), torch.float32, 0, 32, False),  # row stride of 76 bytes
        ((2, 48, 20), torch.float32, 1, 32, False),  # start off by 4 bytes
        ((2, 48, 20), torch.float32, 0, 512, False),  # a box side past 256
        ((2, 48, 8), torch.bfloat16, 0, 32, True),  # row stride of 16 bytes
        ((2, 48, 4), torch.float16, 0, 32, False),  # row stride of 8 bytes
    ],
)
def test_which_tensors_the_accelerator_can_load(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    offset: int,
    rows: int,
    loadable: bool,
    device: torch.device,
) -> None:
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 9:
        pytest.skip("no Tensor Memory Accelerator before compute capability 9")
    storage = torch.zeros(offset + math.prod(shape), dtype=dtype, device=device)
    assert tma_loadable(storage[offset:].view(shape), rows, 16, 16) is loadable


@pytest.mark.parametrize(("tma", "warps"), [(3, 2), (0, 1)])
def test_the_forwards_own_warps_need_tiles_through_the_tma(
    tma: int, warps: int, monkeypatch: pytest.MonkeyPatch, device: torch.device
) -> None:
    # fwd_split was timed with the accelerator's tiles; pointer loads keep split's warps.
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 9:
        pytest.skip("no Tensor Memory Accelerator before compute capability 9")
    monkeypatch.setenv(TILE_ENV, f"block_r=16,split=1,tile_rows=16,fwd_split=2,tma={tma}")
    config = launch.scan_config(
        samu_kernels.parse_backend(samu_kernels.DEFAULT_BACKENDS["samu"]),
        launch.GateMode.SAMU,
        launch.OutMode.Y_H_SKIP,
    )
    u = torch.zeros(2, 48, 32, device=device)
    _, flags = launch._Geometry.of(u, config).forward_sources(
        config, (u, u, u, u, u[..., 0]), has_resets=False
    )
    # Tiles of the chunk, 32 rows, on one warp; twice that on the forward's two.
    assert (flags["num_warps"], flags["TILE"], flags["DESCRIBED"]) == (warps, 32 * warps, tma > 0)


def test_tiles_in_flight_are_as_many_as_fit_a_blocks_shared_memory() -> None:
    # Triton keeps stages - 1 tiles' boxes in shared memory, beside a few KB of its own.
    bf16_tile, fp32_tile = 3 * 256 * 16 * 2, 3 * 256 * 16 * 4  # three [256, 16] boxes
    assert launch.tma_stages_that_fit(4, bf16_tile) == 4
    assert launch.tma_stages_that_fit(8, fp32_tile) == 5  # 6 compiled to 253,064 bytes
    assert launch.tma_stages_that_fit(4, 2 * fp32_tile) == 3
    assert launch.tma_stages_that_fit(3, launch.SHARED_MEMORY_PER_BLOCK) == 0


@pytest.mark.parametrize(("inputs", "stages"), [(1, 4), (2, 2), (4, None)])
def test_descriptor_loads_take_the_depth_their_boxes_fit(
    inputs: int, stages: int | None, device: torch.device
) -> None:
    # [256, 64] fp32 boxes, 64 KB each, one per tiled tensor; the [B, L] flags hold none.
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 9:
        pytest.skip("no Tensor Memory Accelerator before compute capability 9")
    u = torch.randn(1, 256, 64, device=device)
    _, flags = launch.tile_sources((*[u] * inputs, u[..., 0]), 8, 256, 64, 64)
    assert (flags["DESCRIBED"], flags["TILE_STAGES"]) == (stages is not None, stages)


def test_launches_traced_by_torch_compile_load_through_pointers(device: torch.device) -> None:
    # torch.compile traces the launches with fake tensors, and its graph cannot hold host-side
    # tensor descriptors (torch 2.11: Inductor hashes their fake base tensors).
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] < 9:
        pytest.skip("no Tensor Memory Accelerator before compute capability 9")
    shape = (2, 48, 32)
    _, flags = launch.tile_sources((torch.zeros(shape, device=device),), 3, 32, 16, 16)
    assert flags["DESCRIBED"]
    with FakeTensorMode():
        fake = torch.zeros(shape, device=device)
        sources, flags = launch.tile_sources((fake,), 3, 32, 16, 16)
    assert not flags["DESCRIBED"]
    assert sources[0] is fake
