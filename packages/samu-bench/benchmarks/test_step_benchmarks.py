"""One protocol training step per (reference case, default row), under pytest-benchmark.

Not part of the CPU test run: `nox -s gpu_bench` runs this directory on a GPU with
`--benchmark-autosave --benchmark-compare --benchmark-compare-fail=median:10%`.
Each round is one step (forward under bf16 autocast, backward with the fixed output
gradient, fused AdamW) followed by a CUDA synchronize; the untimed setup of every round
clears the gradients. Unlike `samu-bench run`, a test holds only its own row resident.
"""

from __future__ import annotations

import pytest
import torch
from pytest_benchmark.fixture import BenchmarkFixture

from samu_bench import REFERENCE_TOKENS, CaseSpec, ResidentRow, Row, default_plan

ROUNDS = 10
WARMUP_ROUNDS = 3

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CASES_AND_ROWS = [
    pytest.param(plan.case, row, id=f"{plan.case.name}-{row.architecture}-{row.backend}")
    for plan in (default_plan(name, on_cuda=True) for name in REFERENCE_TOKENS)
    for row in plan.rows
]


@pytest.mark.parametrize(("case", "row"), CASES_AND_ROWS)
def test_training_step(benchmark: BenchmarkFixture, case: CaseSpec, row: Row) -> None:
    device = torch.device("cuda")
    resident = ResidentRow(case, row, device, seed=0)

    def synchronized_step() -> None:
        resident.forward_backward_update()
        torch.cuda.synchronize(device)

    benchmark.group = case.name
    benchmark.extra_info.update(
        case=case.name,
        batch=case.batch,
        length=case.length,
        architecture=row.architecture,
        backend=row.backend,
        controller=row.controller,
        parameters=resident.parameters,
    )
    benchmark.pedantic(  # type: ignore[no-untyped-call]
        synchronized_step,
        setup=resident.clear_gradients,
        rounds=ROUNDS,
        warmup_rounds=WARMUP_ROUNDS,
        iterations=1,
    )
