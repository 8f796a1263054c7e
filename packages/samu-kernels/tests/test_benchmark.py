"""The kernel benchmark: its rows, goal lines, tasks and peer steps (the timing needs a GPU)."""

from __future__ import annotations

import math
import os
import sys
import types
from pathlib import Path

import pytest
import torch

from samu_kernels.backends import DEFAULT_BACKENDS, REFERENCE_FILE_ROWS
from samu_kernels.benchmark import (
    BACKENDS,
    CHANNELS_FIRST_BACKENDS,
    CHANNELS_FIRST_SUFFIX,
    COUNTED_TENSORS,
    GOAL_PERCENT_OF_COPY,
    REFERENCE_SHAPES,
    REVISION_VARIABLE,
    BenchmarkRow,
    Timing,
    _row,
    benchmark_tasks,
    goal_lines,
    main,
    provenance,
    sweep_tasks,
)
from samu_kernels.benchmark_steps import peer_steps, scan_step
from samu_kernels.common.geometry import TILE_ENV, format_tile
from samu_kernels.controllers import FUSED_COORDS_CONTROLLER
from samu_kernels.precompile import CompileTask, precompile
from samu_kernels.sweep_grid import sweep_tiles


@pytest.mark.parametrize("architecture", sorted(COUNTED_TENSORS))
def test_bandwidth_comes_from_device_time_and_counted_bytes(architecture: str) -> None:
    shape = REFERENCE_SHAPES["state2048_short"]
    timing = Timing(device_ms=0.5, launch_ms=1.5, method="cuda_graph")
    row = _row("backend", architecture, "state2048_short", shape, timing, copy_gbps=4000.0)
    counted = COUNTED_TENSORS[architecture] * math.prod(shape) * 2
    assert row.counted_bytes == counted
    assert row.median_ms == 0.5
    assert row.launch_ms == 1.5
    assert row.timing == "cuda_graph"
    assert row.gbps == pytest.approx(counted / 0.5e-3 / 1e9)
    assert row.percent_of_copy == pytest.approx(100 * row.gbps / 4000.0)


def test_goal_lines_judge_each_default_backend_against_the_copy_share_and_the_peers() -> None:
    shape = REFERENCE_SHAPES["state2560_medium"]
    copy_gbps = 3000.0

    def row(
        name: str, architecture: str, ms: float, case: str = "state2560_medium"
    ) -> BenchmarkRow:
        timing = Timing(device_ms=ms, launch_ms=ms, method="cuda_graph")
        return _row(name, architecture, case, shape, timing, copy_gbps)

    samu_row = row(DEFAULT_BACKENDS["samu"], "samu", 0.19)
    rows = [
        samu_row,
        row("fused_output_chunk16", "samu", 0.10),  # not a default backend: not judged
        row("accelerated_scan.scalar", "linear_scan", 0.145),
        row("fla.chunk_hgrn", "linear_scan", 0.76),
        row("accelerated_scan.scalar", "linear_scan", 0.5, case="state2048_short"),
    ]
    lines = goal_lines(rows)
    assert lines[0].startswith(f"goal: >= {GOAL_PERCENT_OF_COPY:.0f} % of copy")
    assert lines[1:] == [
        f"state2560_medium   samu  {samu_row.percent_of_copy:5.1f} % of copy (not met); "
        "accelerated_scan.scalar 1.31x, fla.chunk_hgrn 0.25x"
    ]
    assert samu_row.percent_of_copy < GOAL_PERCENT_OF_COPY
    channels_first = row(DEFAULT_BACKENDS["samu"] + CHANNELS_FIRST_SUFFIX, "samu", 0.116)
    assert goal_lines([*rows, channels_first])[2] == (
        f"state2560_medium   samu  channels_first {channels_first.percent_of_copy:5.1f} % of "
        "copy (met); accelerated_scan.scalar 0.80x, fla.chunk_hgrn 0.15x"
    )
    rows[0] = row(DEFAULT_BACKENDS["samu"], "samu", 0.05)
    assert "% of copy (met); accelerated_scan.scalar 0.34x" in goal_lines(rows)[1]
    assert goal_lines(rows[1:]) == []  # no default backend timed: nothing to judge


H200_SMS = 132
TINY = (1, 5, 4)
SAMU_SEQUENTIAL = "fused_output_fused_write_shared_sfu_chunk32"


def test_sweep_tasks_cover_every_reference_backend_and_shape_from_the_heuristic() -> None:
    tasks = sweep_tasks(H200_SMS)
    for shape in REFERENCE_SHAPES.values():
        for architecture, backend, controller in REFERENCE_FILE_ROWS:
            mine = [t for t in tasks if t.shape == shape and t.backend == backend]
            tiles = sweep_tiles(
                backend, shape, H200_SMS, tma_loads=controller == FUSED_COORDS_CONTROLLER
            )
            assert [t.geometry for t in mine] == [format_tile(tile) for tile in tiles]
            assert {t.architecture for t in mine} == {architecture}


def test_benchmark_tasks_use_the_tile_the_run_is_timed_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TILE_ENV, raising=False)
    tasks = benchmark_tasks()
    assert len(tasks) == len(REFERENCE_SHAPES) * (len(BACKENDS) + len(CHANNELS_FIRST_BACKENDS))
    assert {(t.architecture, t.backend) for t in tasks if t.channels_first} == set(
        CHANNELS_FIRST_BACKENDS
    )
    assert {task.geometry for task in tasks} == {""}
    monkeypatch.setenv(TILE_ENV, "unroll=4")
    assert {task.geometry for task in benchmark_tasks()} == {"unroll=4"}


def test_benchmark_tasks_time_only_the_chosen_backends() -> None:
    chosen = [("samu", SAMU_SEQUENTIAL)]
    tasks = benchmark_tasks(chosen, ())
    assert [task.shape for task in tasks] == list(REFERENCE_SHAPES.values())
    assert {(task.architecture, task.backend) for task in tasks} == set(chosen)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--backend", SAMU_SEQUENTIAL], "--backend: expected ARCH:NAME with ARCH one of"),
        (["--backend", "hawk:chunk16"], "architecture must be one of"),
        (["--backend", "samu:chunk17"], "--backend 'samu:chunk17'"),
        (["--backend", "samu:fused_chunk16"], "the token 'fused' is RG-LRU-only"),
        (["--backend", "rglru:reference"], "the benchmark times Triton backends"),
        (["--backend", f"samu:{SAMU_SEQUENTIAL}", "--sweep"], "give one or the other"),
    ],
)
def test_the_command_refuses_a_bad_backend_choice(
    arguments: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "kernels.json"
    with pytest.raises(SystemExit) as stopped:
        main(["--out", str(out), *arguments])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_scan_step_refuses_an_unknown_architecture() -> None:
    with pytest.raises(ValueError, match="architecture must be 'rglru' or 'samu', got 'hawk'"):
        scan_step("hawk", TINY, SAMU_SEQUENTIAL, torch.device("cpu"))


def test_precompile_runs_every_task_in_worker_processes_and_restores_the_tile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TILE_ENV, "unroll=4")
    tasks = [
        CompileTask("samu", SAMU_SEQUENTIAL, TINY, "block_r=16,unroll=2"),
        CompileTask("samu", SAMU_SEQUENTIAL, TINY),
    ]
    report = precompile(tasks, jobs=2, device="cpu")
    assert report.failures == {}
    assert os.environ[TILE_ENV] == "unroll=4"


def test_precompile_reports_a_failing_task_and_goes_on() -> None:
    bad = CompileTask("samu", SAMU_SEQUENTIAL, TINY, "unroll=zero")
    good = CompileTask("samu", SAMU_SEQUENTIAL, TINY, "unroll=2")
    report = precompile([bad, good], jobs=1, device="cpu")
    assert list(report.failures) == [bad]
    assert report.failures[bad] == (
        "ValueError: SAMU_KERNELS_TILE: unroll must be an integer, got 'zero'"
    )


def test_precompile_refuses_no_jobs() -> None:
    with pytest.raises(ValueError, match="jobs must be at least 1, got 0"):
        precompile([], 0)


def test_result_files_say_when_and_on_what_they_were_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setenv(REVISION_VARIABLE, "94196dd")
    made = provenance(torch.device("cuda"))
    assert made["device"] == "NVIDIA H200"
    assert made["revision"] == "94196dd"
    assert made["torch"] == torch.__version__
    assert made["triton"]
    assert made["created"].endswith("+00:00")
    monkeypatch.delenv(REVISION_VARIABLE)
    assert provenance(torch.device("cuda"))["revision"] is None


def _linear_scan_over_time(
    decays: torch.Tensor, tokens: torch.Tensor, time_axis: int
) -> torch.Tensor:
    """h_t = decays_t h_{t-1} + tokens_t along ``time_axis`` (a stand-in for the peers)."""
    states, h = [], torch.zeros_like(tokens.select(time_axis, 0))
    for t in range(tokens.shape[time_axis]):
        h = decays.select(time_axis, t) * h + tokens.select(time_axis, t)
        states.append(h)
    return torch.stack(states, dim=time_axis)


def test_peer_steps_give_every_leaf_a_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """The peers' timed steps, with stand-ins for the libraries (their kernels need a GPU):
    each runs forward + backward in its layout and reaches every leaf it names."""
    fla_hgrn = types.ModuleType("fla.ops.hgrn")

    def hgrn(x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _linear_scan_over_time(g.float().exp(), x.float(), time_axis=1), None

    fla_hgrn.chunk_hgrn = fla_hgrn.fused_recurrent_hgrn = hgrn  # type: ignore[attr-defined]
    accelerated = types.ModuleType("accelerated_scan.scalar")
    accelerated.scan = lambda forget, inputs: _linear_scan_over_time(forget, inputs, time_axis=2)  # type: ignore[attr-defined]
    for name, module in (
        ("fla", types.ModuleType("fla")),
        ("fla.ops", types.ModuleType("fla.ops")),
        ("fla.ops.hgrn", fla_hgrn),
        ("accelerated_scan", types.ModuleType("accelerated_scan")),
        ("accelerated_scan.scalar", accelerated),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    steps = peer_steps((2, 5, 3), torch.device("cpu"))
    assert list(steps) == [
        "fla.chunk_hgrn",
        "fla.fused_recurrent_hgrn",
        "accelerated_scan.scalar",
        "accelerated_scan.scalar+transposes",
    ]
    for name, (step, leaves) in steps.items():
        step()
        for leaf in leaves:
            assert leaf.grad is not None, name
            assert leaf.grad.shape == leaf.shape, name
            assert torch.isfinite(leaf.grad).all(), name
    plain, transposed = (
        steps["accelerated_scan.scalar"][1],
        steps["accelerated_scan.scalar+transposes"][1],
    )
    for bct, blr in zip(plain, transposed, strict=True):
        torch.testing.assert_close(bct.grad.transpose(1, 2), blr.grad)
