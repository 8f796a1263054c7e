"""samu-bench: the training-step timing protocol of samu blocks, as a library and a CLI.

- `measure_case(plan, settings, device)` times one case by the protocol and returns its
  result-file entry; `ResultWriter` writes validated files case by case.
- `CaseSpec`, `Row`, `CasePlan`, `ProtocolSettings` describe what to time;
  `default_plan(name, on_cuda=...)` gives a built-in case with its default rows.
- `samu_bench.peers` adds rows for the public alternatives (fla-core, accelerated-scan,
  recurrentgemma; the optional extra `samu-bench[peers]`).
- `compare_results(base, new)` compares two result files; `step_work` and `GPU_PEAKS`
  give the roofline floor.

The `samu-bench` command (`run`, `show`, `compare`, `plot`) is documented in
`docs/benchmarking.md`.
"""

from samu_bench.catalog import (
    CPU_SMOKE,
    REFERENCE_TOKENS,
    builtin_case,
    builtin_cases,
    default_plan,
    default_rows,
    parse_row,
    reference_rows,
)
from samu_bench.compare import Comparison, RowComparison, compare_results
from samu_bench.config import FileConfig, load_config, parse_config
from samu_bench.environment import collect_environment
from samu_bench.errors import BenchError
from samu_bench.plan import (
    CasePlan,
    CaseSpec,
    ModuleBuilder,
    ProtocolSettings,
    Row,
    SampleLimit,
    SkippedRow,
    build_residual_block,
)
from samu_bench.protocol import (
    ResidentRow,
    StepEvent,
    compile_apart,
    interleaved_order,
    measure_case,
)
from samu_bench.results import PROTOCOL, ResultWriter, load_result_file, result_document
from samu_bench.roofline import GPU_PEAKS, GpuPeak, StepWork, row_floor_ms, step_work

__all__ = [
    "CPU_SMOKE",
    "GPU_PEAKS",
    "PROTOCOL",
    "REFERENCE_TOKENS",
    "BenchError",
    "CasePlan",
    "CaseSpec",
    "Comparison",
    "FileConfig",
    "GpuPeak",
    "ModuleBuilder",
    "ProtocolSettings",
    "ResidentRow",
    "ResultWriter",
    "Row",
    "RowComparison",
    "SampleLimit",
    "SkippedRow",
    "StepEvent",
    "StepWork",
    "build_residual_block",
    "builtin_case",
    "builtin_cases",
    "collect_environment",
    "compare_results",
    "compile_apart",
    "default_plan",
    "default_rows",
    "interleaved_order",
    "load_config",
    "load_result_file",
    "measure_case",
    "parse_config",
    "parse_row",
    "reference_rows",
    "result_document",
    "row_floor_ms",
    "step_work",
]
