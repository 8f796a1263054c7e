"""The roofline floor model."""

from __future__ import annotations

from typing import Any

import pytest

from samu_bench import GPU_PEAKS, row_floor_ms, step_work
from samu_modules import BlockConfig


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_matmul_flops_are_six_per_token_and_weight(architecture: str) -> None:
    config = BlockConfig.from_case("state2048_short", architecture=architecture)  # type: ignore[arg-type]
    work = step_work(
        batch=4,
        length=2048,
        width=2048,
        rnn_width=2048,
        architecture=architecture,
        parameters=config.parameter_count,
    )
    assert work is not None
    d, r = 2048, 2048
    weights = 9 * d * d + 3 * d * r + (2 * r * r // 16 if architecture == "rglru" else 0)
    assert work.matmul_flops == 6 * 4 * 2048 * weights
    # almost every parameter is a matmul weight
    assert weights == pytest.approx(config.parameter_count, rel=0.001)
    assert work.flops > work.matmul_flops
    tokens = 4 * 2048
    scan = 16 + (12 if architecture == "rglru" else 0)
    assert work.minimal_bytes == 16 * tokens * d + scan * tokens * r + 36 * config.parameter_count


def test_floor_for_known_and_unknown_gpus(reference_document: dict[str, Any]) -> None:
    case = reference_document["cases"][0]
    row = case["rows"][0]
    floor = row_floor_ms("NVIDIA H200", case, row)
    work = step_work(
        batch=case["batch"],
        length=case["length"],
        width=case["config"]["width"],
        rnn_width=case["config"]["rnn_width"],
        architecture=row["architecture"],
        parameters=row["parameters"],
    )
    assert work is not None
    h200 = GPU_PEAKS["NVIDIA H200"]
    expected = 1e3 * (work.matmul_flops / 772e12 + work.minimal_bytes / 4.14e12)
    assert (h200.matmul_tflops, h200.copy_tbps) == (772.0, 4.14)
    assert floor == pytest.approx(expected)
    assert row_floor_ms("Some Other GPU", case, row) is None
    assert row_floor_ms(None, case, row) is None
    assert row_floor_ms("NVIDIA H200", case, {**row, "architecture": "peer"}) is None


def test_reference_medians_are_above_their_floor(reference_document: dict[str, Any]) -> None:
    gpu = reference_document["environment"]["gpu"]
    for case in reference_document["cases"]:
        for row in case["rows"]:
            floor = row_floor_ms(gpu, case, row)
            assert floor is not None
            assert 0 < floor < row["optimizer_step"]["minimum_ms"]
