"""`samu-bench profile`: kernel categories, the CPU breakdown and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from triton.runtime.jit import KernelInterface

from samu_bench import CaseSpec, ResidentRow, Row, cli
from samu_bench.breakdown import CATEGORIES, categorize, step_breakdown
from samu_kernels.common import kernels as common_kernels
from samu_kernels.common import split

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul"),
        ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_TNN", "matmul"),
        ("aten::addmm", "matmul"),
        ("forward_runs_kernel", "scan"),
        ("reverse_run_summary_kernel", "scan"),
        ("backward_sequential_kernel", "scan"),
        ("chunk_hgrn_fwd_kernel_h", "scan"),
        ("rms_norm_backward_kernel", "samu layers"),
        ("triton_poi_fused__to_copy_add_convolution_mul_0", "compiled fusion"),
        ("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", "optimizer"),
        ("void at::native::conv_depthwise2d_forward_kernel<1, float>", "conv"),
        ("Memcpy DtoD (Device -> Device)", "memory"),
        (
            "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>",
            "eager elementwise",
        ),
        ("aten::mul", "eager elementwise"),
        ("something_new", "other"),
    ],
)
def test_kernels_fall_in_categories(name: str, category: str) -> None:
    assert categorize(name) == category
    assert category in CATEGORIES


def test_every_scan_kernel_is_a_scan() -> None:
    # Each Triton kernel of the scan ops, by the name the profiler reports.
    scan_modules = (common_kernels, split)
    names = [
        name
        for module in scan_modules
        for name, value in vars(module).items()
        if isinstance(value, KernelInterface) and name.endswith("_kernel")
    ]
    assert {"backward_split_kernel", "backward_chained_kernel"} <= set(names)
    assert {name: categorize(name) for name in names} == dict.fromkeys(names, "scan")


def linear_row(case: CaseSpec, row: Row, device: torch.device) -> torch.nn.Module:
    return torch.nn.Linear(case.width, case.width).to(device)


def test_cpu_breakdown_sums_its_ops(tiny_case: CaseSpec) -> None:
    resident = ResidentRow(tiny_case, Row("test", "linear", None, build_module=linear_row), CPU, 0)
    breakdown = step_breakdown(resident, CPU, warmup=1, steps=2)
    assert breakdown.row == "test:linear"
    assert not breakdown.on_device
    assert breakdown.busy is None  # op times on a CPU are not device time
    assert breakdown.step_ms > 0
    assert set(breakdown.categories) == set(CATEGORIES)
    assert sum(breakdown.categories.values()) == pytest.approx(breakdown.kernel_ms)
    assert breakdown.categories["matmul"] > 0  # the linear map's addmm / mm
    times = [kernel.ms_per_step for kernel in breakdown.kernels]
    assert times == sorted(times, reverse=True)
    assert json.loads(json.dumps(breakdown.entry()))["row"] == "test:linear"


@pytest.mark.parametrize(("warmup", "steps"), [(0, 1), (1, 0)])
def test_breakdown_refuses_no_steps(tiny_case: CaseSpec, warmup: int, steps: int) -> None:
    resident = ResidentRow(tiny_case, Row("test", "linear", None, build_module=linear_row), CPU, 0)
    with pytest.raises(ValueError, match="must be at least 1"):
        step_breakdown(resident, CPU, warmup=warmup, steps=steps)


def test_profile_command_prints_and_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "profile.json"
    arguments = ["profile", "--case", "cpu_smoke", "--warmup", "2", "--steps", "1", "--top", "3"]
    assert cli.main([*arguments, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "cpu_smoke: ms per step by kernel category" in printed
    assert "rglru:reference: top 3 kernels" in printed
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["profiled_steps"] == 1
    [case] = document["cases"]
    assert [row["row"] for row in case["rows"]] == ["rglru:reference", "samu:reference:reference"]

    assert cli.main([*arguments, "--out", str(out)]) == 1  # never overwritten without --force
    assert "exists; pass --force" in capsys.readouterr().err


def test_profile_command_names_a_bad_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", "--case", "cpu_smoke", "--row", "rglru:nonsense"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("samu-bench: error:")
    assert "nonsense" in error
    assert len(error.strip().splitlines()) == 1
