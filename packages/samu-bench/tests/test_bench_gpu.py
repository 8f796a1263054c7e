"""The protocol and the CLI on a CUDA GPU (Triton backends, CUDA events, memory)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

import samu_schema
from samu_bench import CasePlan, CaseSpec, ProtocolSettings, default_rows, measure_case
from samu_bench.cli import main
from samu_bench.protocol import CUDA_GRAPH_MEMORY_NOTE, ResidentRow

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SMALL = CaseSpec(name="small", batch=2, length=301, width=256, rnn_width=320, depth=2)


def test_default_backends_on_a_small_case() -> None:
    device = torch.device("cuda")
    plan = CasePlan(SMALL, default_rows(SMALL.name, on_cuda=True))
    entry = measure_case(plan, ProtocolSettings(samples=4, warmup=3), device)
    for row in entry["rows"]:
        assert row["backend"] != "reference"
        assert row["baseline_allocated_bytes"] > 0
        assert row["peak_allocated_bytes"] >= row["baseline_allocated_bytes"]
        assert row["peak_reserved_delta_bytes"] >= 0
        assert len(row["optimizer_step"]["samples_ms"]) == 4
    environment = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": "test"}
    document = {
        "schema_version": 1,
        "protocol": {
            "scope": "s",
            "optimizer": "o",
            "dtype": "d",
            "order": "AB/BA",
            "compile_and_optimizer_state_initialization_excluded": True,
        },
        "environment": environment,
        "cases": [entry],
    }
    assert samu_schema.validate(document).ok


def test_cli_run_on_gpu_writes_a_cuda_file(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    sizes = ["--batch", "1", "--length", "517", "--width", "128", "--rnn-width", "192"]
    args = ["run", "--case", "state2048_short", *sizes, "--samples", "3", "--out", str(out)]
    assert main(args) == 0
    document = json.loads(out.read_text())
    assert samu_schema.validate(document).ok
    environment = document["environment"]
    assert environment["device"] == "cuda"
    assert environment["gpu"] == torch.cuda.get_device_name()
    assert document["protocol"]["timer"] == "cuda_events"
    [case] = document["cases"]
    assert case["case"] == "custom"
    assert [row["backend"] for row in case["rows"]] == [
        "fused_grouped_prefix32_hierarchical_chunk16",
        "fused_output_fused_write_shared_sfu_chunk32",
    ]


def test_compiled_rows_on_gpu(tmp_path: Path) -> None:
    out = tmp_path / "compiled.json"
    args = ["run", "--case", "state2048_short", "--batch", "1", "--length", "256"]
    args += ["--width", "128", "--rnn-width", "128", "--compile", "--samples", "2"]
    assert main([*args, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["cases"][0]["rows"]
    compiled = [row["backend"] for row in rows if row["compiled"]]
    eager = [row["backend"] for row in rows if not row["compiled"]]
    assert compiled == [backend + "+compile" for backend in eager]
    assert len(eager) == 2


def test_compiled_rows_time_without_compiling_on_gpu() -> None:
    # Every compiled row enters apart and warms up in rounds: no compilation is left for the
    # timed samples (the protocol refuses one with a BenchError).
    device = torch.device("cuda")
    rows = default_rows(SMALL.name, on_cuda=True)
    compiled = tuple(dataclasses.replace(row, compiled=True) for row in rows)
    entry = measure_case(
        CasePlan(SMALL, rows + compiled), ProtocolSettings(samples=3, warmup=3), device
    )
    assert [row["compiled"] for row in entry["rows"]] == [False, False, True, True]


def test_profile_breaks_the_step_down_on_gpu(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    sizes = ["--batch", "1", "--length", "517", "--width", "128", "--rnn-width", "192"]
    args = ["profile", "--case", "state2048_short", *sizes, "--steps", "2", "--out", str(out)]
    assert main(args) == 0
    [case] = json.loads(out.read_text())["cases"]
    for row in case["rows"]:
        assert row["categories"]["matmul"] > 0
        assert row["categories"]["scan"] > 0  # our Triton scan kernels are named and found
        assert 0 < row["busy"] <= 1.5


def test_cuda_graph_rows_read_memory_from_the_recording_on_gpu() -> None:
    device = torch.device("cuda")
    rows = default_rows(SMALL.name, on_cuda=True)
    compiled = tuple(dataclasses.replace(row, compiled=True) for row in rows)
    graphed = tuple(dataclasses.replace(row, compiled=True, cuda_graphs=True) for row in rows)
    entry = measure_case(
        CasePlan(SMALL, rows + compiled + graphed), ProtocolSettings(samples=3, warmup=3), device
    )
    by_backend = {row["backend"]: row for row in entry["rows"]}
    for row in rows:
        graph_row = by_backend[row.backend + "+compile+cudagraphs"]
        compiled_row = by_backend[row.backend + "+compile"]
        assert graph_row["cuda_graphs"] is True
        assert compiled_row["cuda_graphs"] is False
        assert graph_row["memory_measured_in"] == CUDA_GRAPH_MEMORY_NOTE
        recorded = graph_row["peak_allocated_delta_bytes"]
        # The recording's reading, not a replay's (which allocates nothing). It is a lower
        # bound of the step's memory, not comparable to the compiled row's: the rows share
        # CUDAGraph Trees' pool, and a recording frees the previous generation's tensors
        # (on the H200: 4.0 MB for the first graphed row against 7.7 MB compiled).
        assert recorded > 0
        assert graph_row["replay_peak_allocated_delta_bytes"] < recorded / 2


def test_a_step_graph_replays_the_same_training_on_gpu() -> None:
    """Five steps as warm-up, capture and replays update the weights as five plain steps."""
    torch.compiler.reset()
    device = torch.device("cuda")
    row = dataclasses.replace(default_rows(SMALL.name, on_cuda=True)[0], compiled=True)
    plain = ResidentRow(SMALL, row, device, seed=0)
    graphed = ResidentRow(SMALL, dataclasses.replace(row, step_graph=True), device, seed=0)
    initial = [parameter.detach().clone() for parameter in plain.module.parameters()]
    for _ in range(5):
        plain.step()
    graphed.step()
    graphed.step()
    graphed.prepare_capture()  # one step on the capture stream
    graphed.capture_step()  # runs nothing
    graphed.step()
    graphed.step()
    torch.cuda.synchronize()
    for start, want, got in zip(
        initial, plain.module.parameters(), graphed.module.parameters(), strict=True
    ):
        expected, actual = want.detach() - start, got.detach() - start
        assert torch.linalg.vector_norm(actual - expected) <= 1e-2 * torch.linalg.vector_norm(
            expected
        )


def test_step_graph_rows_read_memory_from_the_capture_on_gpu() -> None:
    device = torch.device("cuda")
    rows = default_rows(SMALL.name, on_cuda=True)
    compiled = tuple(dataclasses.replace(row, compiled=True) for row in rows)
    graphed = tuple(dataclasses.replace(row, step_graph=True) for row in compiled)
    entry = measure_case(
        CasePlan(SMALL, compiled + graphed), ProtocolSettings(samples=3, warmup=3), device
    )
    by_backend = {row["backend"]: row for row in entry["rows"]}
    for row in rows:
        graph_row = by_backend[row.backend + "+compile+stepgraph"]
        compiled_row = by_backend[row.backend + "+compile"]
        assert graph_row["step_graph"] is True
        assert "capture" in graph_row["memory_measured_in"]
        captured = graph_row["peak_allocated_delta_bytes"]
        assert captured >= 0.9 * compiled_row["peak_allocated_delta_bytes"]
        assert graph_row["replay_peak_allocated_delta_bytes"] < captured / 2
