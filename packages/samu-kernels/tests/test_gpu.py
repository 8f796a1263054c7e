"""GPU tests: the full backend matrix at real shapes, the reference-file cases, determinism
and torch.compile(fullgraph=True) through the custom ops."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from kernel_cases import (
    Problem,
    assert_matches_reference,
    assert_tma_loads_agree,
    make_problem,
    relative_error,
    run,
    saturate,
)

import samu_kernels
from samu_kernels.benchmark import REFERENCE_SHAPES
from samu_kernels.common.chunk import FAST_MATH, FAST_MATH_ENV
from samu_kernels.common.geometry import TILE_ENV
from samu_kernels.common.reference import swap_layout

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CUDA = torch.device("cuda")
HIERARCHICAL_ROWS = [row for row in samu_kernels.REFERENCE_FILE_ROWS if "hierarchical" in row[1]]
TIME_SPLIT_ROWS = [
    ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "fp32_fused_coords"),
    ("samu", "fused_output_chunk16", "reference"),  # precomputed gates, saved states
    ("rglru", "fused_shared_sfu_chunk16", None),
]
"""Backends of the time-split kernels: SAMU's and RG-LRU's fused gates, precomputed ones."""
FUSED_TIME_SPLIT_ROWS = [row for row in TIME_SPLIT_ROWS if row[2] != "reference"]
"""Those that may load through the TMA (precomputed gates take pointers)."""


@pytest.fixture(autouse=True)
def release_cached_memory() -> Iterator[None]:
    """Hands the caching allocator's blocks back after each test: pytest-xdist workers share
    the GPU, and a worker that ran a reference shape (fp64 reference tensors of 0.5 GB each)
    would otherwise keep them from its neighbours and the guarded-math test's process."""
    yield
    torch.cuda.empty_cache()


def _matrix(architecture: str) -> list[tuple[str, str | None]]:
    """Every feature combination (sequential at chunk 32, hierarchical at 8, grouped at 128),
    with both SAMU controllers."""
    cases: list[tuple[str, str | None]] = []
    fused_options = (False, True) if architecture == "rglru" else (False,)
    for fused, fused_output, fused_write, shared_sfu in itertools.product(
        fused_options, (False, True), (False, True), (False, True)
    ):
        prefix = [
            name
            for name, on in (
                ("fused", fused),
                ("fused_output", fused_output),
                ("fused_write", fused_write),
                ("shared_sfu", shared_sfu),
            )
            if on
        ]
        for middle, chunk in (
            ([], 32),
            (["hierarchical"], 8),
            (["grouped_prefix8_hierarchical"], 128),
        ):
            backend = "_".join([*prefix, *middle, f"chunk{chunk}"])
            if architecture == "rglru":
                cases.append((backend, None))
            else:
                cases.extend((backend, controller) for controller in samu_kernels.CONTROLLERS)
    return cases


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"),
    [("rglru", *case) for case in _matrix("rglru")] + [("samu", *case) for case in _matrix("samu")],
)
def test_backend_matrix(architecture: str, backend: str, controller: str | None) -> None:
    problem = make_problem(architecture, (3, 1000, 300), torch.float32, CUDA, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"),
    [("rglru", *case) for case in _matrix("rglru") if "hierarchical" not in case[0]]
    + [("samu", *case) for case in _matrix("samu") if "hierarchical" not in case[0]],
)
def test_row_walk_sequential_kernels(
    architecture: str, backend: str, controller: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The matrix runs the sequential backends time-split (the default); split=0 walks rows.
    monkeypatch.setenv(TILE_ENV, "split=0")
    problem = make_problem(architecture, (3, 1000, 300), torch.float32, CUDA, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("case", list(REFERENCE_SHAPES))
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"), samu_kernels.REFERENCE_FILE_ROWS
)
def test_reference_file_rows_at_reference_shapes(
    case: str, architecture: str, backend: str, controller: str | None
) -> None:
    problem = make_problem(
        architecture, REFERENCE_SHAPES[case], torch.bfloat16, CUDA, resets=True, h0=False
    )
    assert_matches_reference(problem, backend, controller)


@pytest.mark.parametrize(
    ("architecture", "backend", "controller", "tile"),
    [(*row, "") for row in samu_kernels.REFERENCE_FILE_ROWS]
    + [(*row, tile) for row in HIERARCHICAL_ROWS for tile in ("chained=1", "lookback=2")],
)
def test_gradients_are_bitwise_deterministic(
    architecture: str,
    backend: str,
    controller: str | None,
    tile: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TILE_ENV, tile)
    problem = make_problem(
        architecture, (1, 8192, 2560), torch.bfloat16, CUDA, resets=True, h0=True
    )
    first = run(problem, backend, controller)
    second = run(problem, backend, controller)
    for name, value in first.items():
        assert torch.equal(value, second[name]), name


def assert_compiled_matches_eager(
    mixer: Callable[..., torch.Tensor],
    tensors: dict[str, torch.Tensor],
    *,
    bf16_tolerance: float = 1e-5,
) -> None:
    """Every gradient of ``mixer(**tensors)`` (a loss) compiled with ``fullgraph=True``
    against eager, to 1e-5 relative (``bf16_tolerance`` for bf16 gradients): Inductor may
    reduce the parameter-gradient partials in another order than eager torch.sum, so the
    two agree to rounding, not bit for bit."""
    compiled = torch.compile(mixer, fullgraph=True)
    grads = []
    for fn in (mixer, compiled):
        leaves = {k: v.detach().clone().requires_grad_(True) for k, v in tensors.items()}
        torch.autograd.backward(fn(**leaves))
        grads.append({k: v.grad for k, v in leaves.items()})
    for name, grad in grads[0].items():
        assert grad is not None, name
        assert grads[1][name] is not None, name
        tolerance = bf16_tolerance if grad.dtype == torch.bfloat16 else 1e-5
        assert relative_error(grads[1][name], grad) <= tolerance, name


@pytest.mark.parametrize("final_state_in_loss", [True, False])
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"), samu_kernels.REFERENCE_FILE_ROWS
)
def test_torch_compile_fullgraph_traces_the_custom_ops(
    architecture: str, backend: str, controller: str | None, final_state_in_loss: bool
) -> None:
    """Compiled against eager, every gradient; an unused final state reaches the backward
    as None (the launcher's zeros, which Inductor must be able to lower)."""
    problem = make_problem(architecture, (2, 300, 256), torch.bfloat16, CUDA, resets=True, h0=True)
    tensors = {k: v for k, v in problem.tensors.items() if v is not None}
    h0 = tensors.pop("h0")

    def mixer(**inputs: torch.Tensor) -> torch.Tensor:
        if architecture == "rglru":
            result = samu_kernels.rglru_scan(
                **inputs, segment_pos=problem.segment_pos, h0=h0, backend=backend
            )
        else:
            result = samu_kernels.samu_scan(
                **inputs,
                segment_pos=problem.segment_pos,
                h0=h0,
                backend=backend,
                controller=controller or samu_kernels.DEFAULT_CONTROLLER,
            )
        loss = (result.output.float() * problem.grad_output).sum()
        return loss + result.final_state.sum() if final_state_in_loss else loss

    assert_compiled_matches_eager(mixer, tensors)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("tile", ["chained=1", "lookback=2"])
@pytest.mark.parametrize("case", list(REFERENCE_SHAPES))
@pytest.mark.parametrize(("architecture", "backend", "controller"), HIERARCHICAL_ROWS)
def test_one_pass_hierarchical_forms_at_reference_shapes(
    case: str,
    architecture: str,
    backend: str,
    controller: str | None,
    tile: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The one-launch hierarchical forms, opt-in tile knobs: `chained` (runs chained through
    # flags by tickets) and `lookback=2` (the chained runs looking back over run summaries);
    # forward, every gradient and the final state against the fp64 reference.
    monkeypatch.setenv(TILE_ENV, tile)
    problem = make_problem(
        architecture, REFERENCE_SHAPES[case], torch.bfloat16, CUDA, resets=True, h0=True
    )
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    "tile",
    [
        "block_r=32,split=4,tile_rows=32",  # 8 rows per segment, 4 segments
        "block_r=16,split=4,tile_rows=128",  # 16 rows per segment, 8 segments
        # The forward on 8 warps and tiles of 256 rows, the backward on 4 and 128.
        "block_r=16,split=4,tile_rows=128,fwd_split=8",
        # Programs of 24 channels on 32 lanes (geometry.one_program_per_sm's form).
        "block_r=32,split=8,tile_rows=128,channels=24",
        # Four balanced programs: shares of 1.5 or 14 blocks, cut blocks handed over.
        "block_r=16,split=8,tile_rows=256,fwd_split=0,programs=4",
    ],
)
@pytest.mark.parametrize("shape", [(3, 1037, 300), (1, 9000, 96)])
@pytest.mark.parametrize(("architecture", "backend", "controller"), TIME_SPLIT_ROWS)
def test_time_split_geometries_match_the_reference(
    architecture: str,
    backend: str,
    controller: str | None,
    shape: tuple[int, int, int],
    tile: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The time-split sequential kernels at odd shapes (L not a multiple of the tile, R of
    # the channel block) with segments of 4 and 8 rows, resets and h0, in bf16.
    monkeypatch.setenv(TILE_ENV, tile)
    problem = make_problem(architecture, shape, torch.bfloat16, CUDA, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("shape", [*REFERENCE_SHAPES.values(), (2, 1040, 296)])
@pytest.mark.parametrize(("architecture", "backend", "controller"), FUSED_TIME_SPLIT_ROWS)
def test_tiles_through_the_tma_equal_pointer_loads(
    architecture: str,
    backend: str,
    controller: str | None,
    shape: tuple[int, int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The heuristic geometry with tiles through the Tensor Memory Accelerator (tma=3):
    # the pointer loads' bits on the reference shapes and on an odd one (L not a multiple
    # of the tile, R of the channel block; both keep the accelerator's 16-byte alignment).
    problem = make_problem(architecture, shape, torch.bfloat16, CUDA, resets=True, h0=True)
    assert_tma_loads_agree(problem, backend, controller, "", monkeypatch)


def medium_problem(architecture: str) -> Problem:
    """Fresh bf16 inputs of the medium reference shape, with resets and h0."""
    return make_problem(
        architecture, REFERENCE_SHAPES["state2560_medium"], torch.bfloat16, CUDA, resets=True,
        h0=True,
    )  # fmt: skip


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(("architecture", "backend", "controller"), FUSED_TIME_SPLIT_ROWS)
def test_programs_of_fewer_channels_through_the_tma_equal_pointer_loads(
    architecture: str, backend: str, controller: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The medium reference shape as 107 programs of 24 channels on 32 lanes: box starts 48
    # bytes apart, the lanes past 24 holding the neighbour's channels (never stored).
    tile = "block_r=32,split=8,tile_rows=128,channels=24"
    assert_tma_loads_agree(medium_problem(architecture), backend, controller, tile, monkeypatch)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("cut", ["programs", "pieces=4", "persistent"])
@pytest.mark.parametrize(("architecture", "backend", "controller"), FUSED_TIME_SPLIT_ROWS)
def test_cut_blocks_equal_the_whole_block_programs(
    architecture: str,
    backend: str,
    controller: str | None,
    cut: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The medium reference shape's 160 blocks on one program per SM (programs), or each cut
    # into 4 pieces, one program each or taken round-robin by one persistent program per
    # SM: every cut block's carry is the state (and gradient) the whole-block program
    # reaches there, so output, final state and input gradients are its bits; the parameter
    # gradients add a partial sum per piece, within the reference's tolerance. One
    # exception: RG-LRU's persistent backward contracts three multiply-adds fewer into FMAs
    # (Triton 3.6's PTX: 216 fma, 254 mul, 24 add against the whole blocks' 219, 248, 19;
    # likely the loop's piece branches part them), so in its gate_a logits gradient 525 of
    # 21 M bf16 values round the other way (H100, 2026-12-07): equal to fp32 rounding there.
    problem = medium_problem(architecture)
    whole_blocks = "block_r=16,split=8,tile_rows=256,fwd_split=0"
    monkeypatch.setenv(TILE_ENV, whole_blocks)
    whole = run(problem, backend, controller)
    multiprocessors = torch.cuda.get_device_properties(CUDA).multi_processor_count
    persistent = cut == "persistent"
    if cut == "programs":
        cut = f"programs={multiprocessors}"
    elif persistent:
        cut = f"pieces=4,programs={multiprocessors}"
    monkeypatch.setenv(TILE_ENV, f"{whole_blocks},{cut}")
    cut_blocks = assert_matches_reference(problem, backend, controller)
    sequences = {"output", "final_state", "grad_h0", "grad_u", "grad_y"}
    sequences |= {"grad_gate_x_logits", "grad_gate_a_logits"}
    for name in sequences & whole.keys():
        if persistent and name == "grad_gate_a_logits":
            assert relative_error(cut_blocks[name], whole[name]) <= 1e-4, name
        else:
            assert torch.equal(cut_blocks[name], whole[name]), name


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("tile", ["pieces=3,programs=7", "pieces=5,programs=64,tma=0"])
@pytest.mark.parametrize(("architecture", "backend", "controller"), FUSED_TIME_SPLIT_ROWS)
def test_persistent_programs_at_odd_shapes(
    architecture: str,
    backend: str,
    controller: str | None,
    tile: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Few programs, each waiting for pieces other programs scan (the interpreter cannot run
    # that): L not a multiple of the tiles, the last piece shorter than the others (tiles past
    # the end), R not a multiple of the block (rows of 592 bytes: TMA boxes), three batch rows;
    # through the TMA and through pointers.
    monkeypatch.setenv(TILE_ENV, f"block_r=16,split=4,tile_rows=64,{tile}")
    problem = make_problem(architecture, (3, 1037, 296), torch.bfloat16, CUDA, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("prefetch", ["prefetch=1", "prefetch=2,chunks=3"])
@pytest.mark.parametrize("shape", [(2, 1037, 300), REFERENCE_SHAPES["state2048_short"]])
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"),
    [
        *samu_kernels.REFERENCE_FILE_ROWS,
        ("rglru", "hierarchical_chunk8", None),  # precomputed fp32 gates: two lines per row
        ("samu", "fused_output_fused_write_chunk16", "reference"),  # u for the skip term
    ],
)
def test_l2_prefetch_matches_the_reference(
    architecture: str,
    backend: str,
    controller: str | None,
    shape: tuple[int, int, int],
    prefetch: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The tile knob `prefetch` asks L2 for the chunk that far ahead of every walk; its rows
    # are clamped to the sequence and its lines to the width (L not a multiple of the chunk,
    # R not of the channel block), and it must change no value.
    monkeypatch.setenv(TILE_ENV, prefetch)
    problem = make_problem(architecture, shape, torch.bfloat16, CUDA, resets=True, h0=True)
    assert_matches_reference(problem, backend, controller)


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize(
    ("architecture", "backend", "controller"),
    [
        *[row for row in samu_kernels.REFERENCE_FILE_ROWS if "shared_sfu" in row[1]],
        ("rglru", "fused_shared_sfu_grouped_prefix32_hierarchical_chunk16", None),
        ("rglru", "fused_fused_output_fused_write_shared_sfu_chunk32", None),
    ],
)
def test_saturated_gates_on_gpu(architecture: str, backend: str, controller: str | None) -> None:
    # The flush-to-zero forms where 2^-z overflows (ex2.approx gives inf, rcp.approx of inf
    # 0), decays are exactly 1 and the sqrt's derivative is clipped.
    problem = make_problem(architecture, (3, 1037, 300), torch.float32, CUDA, resets=True, h0=True)
    saturate(problem)
    got = assert_matches_reference(problem, backend, controller)
    assert all(bool(torch.isfinite(value).all()) for value in got.values())


def test_fast_math_is_on_exactly_when_asked() -> None:
    assert bool(FAST_MATH) == (os.environ.get(FAST_MATH_ENV, "1") == "1")


def test_guarded_math_matches_the_reference_on_gpu() -> None:
    """`SAMU_KERNELS_FAST_MATH=0` (read at import, so in a fresh process; the rest of the
    suite runs the default, flush-to-zero): the reference-file rows at the reference shapes
    and half of the backend matrix (every fused_write backend: both transcendental modes,
    sequential, hierarchical and grouped, fp32 with resets and h0) against the fp64
    reference."""
    selection = (
        "test_fast_math_is_on_exactly_when_asked or test_reference_file_rows_at_reference_shapes"
        " or (test_backend_matrix and fused_write)"
    )
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    command += ["-n", "4"]  # pytest-xdist: four compiles at a time from a cold cache
    command += ["--maxfail", "1", "--tb", "short"]  # the first failure's traceback, in full
    result = subprocess.run(
        [*command, "-k", selection, str(Path(__file__))],
        env={**os.environ, FAST_MATH_ENV: "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_compare_tiles_times_every_geometry_and_restores_the_tile_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from samu_kernels.compare_tiles import HEURISTIC, compare_tiles  # noqa: PLC0415

    monkeypatch.setenv(TILE_ENV, "split=4")
    tiles = [HEURISTIC, "split=8"]
    timings = compare_tiles(
        CUDA,
        "samu",
        samu_kernels.DEFAULT_BACKENDS["samu"],
        (2, 1037, 300),
        tiles,
        rounds=2,
        profile_kernels=True,
    )
    assert [timing.tile for timing in timings] == tiles
    assert all(len(timing.rounds_ms) == 2 and timing.median_ms > 0 for timing in timings)
    assert timings[0].relative == 1.0
    assert any("backward_split_kernel" in name for name in timings[1].kernels_ms)
    assert os.environ[TILE_ENV] == "split=4"


def test_strip_probe_times_each_probe_and_writes_the_product() -> None:
    from samu_kernels.common.launch import tma_device  # noqa: PLC0415
    from samu_kernels.strip_probe import (  # noqa: PLC0415
        StripProbe,
        stream_schedule,
        stream_strips,
        time_probes,
    )
    from samu_kernels.strip_probe.schedules import Schedule, piece_major  # noqa: PLC0415

    described = tma_device(CUDA)
    schedule = Schedule("t", piece_major(40, 4, 4, 33), 640, 16, 256, 4, 8, described)
    scattered = StripProbe("t", 40, 16, 64, 3, 4, 0, True)
    probes: list[StripProbe | Schedule] = [StripProbe("t", 40, 16, 64, 3, 4), scattered, schedule]
    timings = time_probes(probes, CUDA, 1024, rounds=2)
    assert [timing.probe for timing in timings] == probes
    assert all(len(t.rounds_ms) == 2 and t.median_ms > 0 and t.gbps > 0 for t in timings)
    x = torch.randn(1024, 640, device=CUDA, dtype=torch.bfloat16)
    y = torch.randn_like(x)
    product = (x.float() * y.float()).to(torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    stream_strips(scattered, x, y, out)
    torch.testing.assert_close(out, product, rtol=0, atol=0)
    out = torch.full_like(x, float("nan"))
    stream_schedule(schedule, x, y, out)
    torch.testing.assert_close(out, product, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(1, 512, 64), (3, 300, 80)])
def test_time_split_backward_sums_its_parameter_gradients_itself(
    shape: tuple[int, int, int],
) -> None:
    # The SAMU default's step is its scan kernels, the parameters' packing copy and one zero fill
    # (the final state's gradient and the partial-sum counters): no reduction kernel, and
    # no zero gradients filled by autograd for the unused outputs.
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    from samu_kernels.benchmark_steps import scan_step  # noqa: PLC0415

    step, leaves = scan_step("samu", shape, samu_kernels.DEFAULT_BACKENDS["samu"], CUDA)
    step()
    torch.cuda.synchronize()
    for leaf in leaves:
        leaf.grad = None
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        step()
        torch.cuda.synchronize()
    kernels = [event.key for event in profiler.key_averages() if event.self_device_time_total]
    assert not [name for name in kernels if "reduce_kernel" in name], kernels
    fills = [event.count for event in profiler.key_averages() if "FillFunctor" in event.key]
    assert sum(fills) == 1, kernels


@pytest.mark.usefixtures("poisoned_buffers")
@pytest.mark.parametrize("case", list(REFERENCE_SHAPES))
@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_channels_first_defaults_at_reference_shapes(case: str, architecture: str) -> None:
    """The default backends on [B, R, L] sequences, against the float64 reference on
    [B, L, R], then a bit-identical rerun."""
    problem = make_problem(
        architecture, REFERENCE_SHAPES[case], torch.bfloat16, CUDA, resets=True, h0=True
    )
    backend = samu_kernels.DEFAULT_BACKENDS[architecture]
    first = assert_matches_reference(problem, backend, None, channels_first=True)
    second = run(problem, backend, None, channels_first=True)
    for name, value in first.items():
        assert torch.equal(value, second[name]), name


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_torch_compile_traces_the_channels_first_scans(architecture: str) -> None:
    """Compiled (fullgraph) against eager on [B, R, L] sequences, every gradient."""
    problem = make_problem(architecture, (2, 300, 256), torch.bfloat16, CUDA, resets=True, h0=True)
    tensors = {
        k: swap_layout(v, v.ndim == 3).contiguous()
        for k, v in problem.tensors.items()
        if v is not None
    }
    h0 = tensors.pop("h0")
    grad_output = swap_layout(problem.grad_output, True).float()
    scan = samu_kernels.rglru_scan if architecture == "rglru" else samu_kernels.samu_scan

    def mixer(**inputs: torch.Tensor) -> torch.Tensor:
        result = scan(**inputs, segment_pos=problem.segment_pos, h0=h0, channels_first=True)
        return (result.output.float() * grad_output).sum() + result.final_state.sum()

    # Compiled and eager may round a few bf16 input gradients the other way (2.4e-5
    # measured for RG-LRU's gate_x_logits on an H100): bf16's resolution, not a bug.
    assert_compiled_matches_eager(mixer, tensors, bf16_tolerance=1e-4)
