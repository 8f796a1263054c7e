"""Where the Griffin block's training step goes: layers x compile, matmul floor, AdamW, memory.

For every reference case and each of its default rows (`samu_bench.reference_rows`) this
times the protocol step (`samu_bench.measure_case`: bf16 autocast forward, backward, fused
AdamW; AB/BA samples; peak allocated delta) of four variants of the block:

- `<backend>+torch_layers` and `<backend>+fused_layers`: `BlockConfig.layers` "torch"
  (PyTorch ops) or "fused" (samu-kernels' Triton norms and GELUs), eager;
- the same two with `+compile` (`torch.compile`, default Inductor, each row apart);

plus two floor references: `matmul_only:cublas_bf16`, a module made of the block's dense
matrix products only (joined by three elementwise adds), timed by the same protocol, and
fused AdamW on the block's parameters alone. `matmul_only - adamw` estimates the matrix
products' forward + backward.

Memory beyond the peak: for every variant one more forward measures the bytes held when it
returns (CUDA allocator, output included) and the bytes saved for the backward (distinct
storages packed by `torch.autograd.graph.saved_tensors_hooks`, the input and parameters
excluded; null where the compiled forward does not run under the hooks).

Run on the GPU machine from the repository root (no uv needed):

    PYTHONPATH=$(echo packages/*/src | tr ' ' :) python scripts/ablate_block.py --out ablation.json

Flags: --samples/--warmup (10/3), --cases (a subset of the reference cases, or cpu_smoke
for a CPU dry run), --skip-compile. A short table is printed last; --out gets the full JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

import samu_bench
from samu_bench.catalog import default_rows
from samu_bench.instruments import timer_for
from samu_bench.plan import row_label
from samu_modules import REFERENCE_CASES, BlockConfig, Layers, ResidualBlock


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of running the block: its layers and whether it is compiled."""

    layers: Layers
    compiled: bool

    @property
    def suffix(self) -> str:
        """Appended to the row's backend (the protocol appends `+compile` itself)."""
        return f"+{self.layers}_layers"


VARIANTS = (
    Variant("torch", compiled=False),
    Variant("fused", compiled=False),
    Variant("torch", compiled=True),
    Variant("fused", compiled=True),
)
MATMUL_ARCHITECTURE = "matmul_only"


class BlockMatmuls(nn.Module):
    """The dense matrix products of one block at its shapes: `x [B, L, D] -> [B, L, D]`.

    `linear_out(linear_x(x) + linear_y(x)) + ffw_down(gate + value)`, `[gate, value] =
    ffw_up(x)`: every weight of the block but the conv, norms and mixer, and only three
    elementwise adds to join the branches.
    """

    def __init__(self, case: samu_bench.CaseSpec, device: torch.device) -> None:
        super().__init__()
        width, rnn_width, hidden = case.width, case.rnn_width, 3 * case.width
        self.hidden = hidden
        self.linear_x = nn.Linear(width, rnn_width, device=device)
        self.linear_y = nn.Linear(width, rnn_width, device=device)
        self.linear_out = nn.Linear(rnn_width, width, device=device)
        self.ffw_up = nn.Linear(width, 2 * hidden, device=device)
        self.ffw_down = nn.Linear(hidden, width, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`x` [B, L, D] -> [B, L, D] (bf16 under bf16 autocast)."""
        mixed = self.linear_out(self.linear_x(x) + self.linear_y(x))
        gate, value = self.ffw_up(x).chunk(2, dim=-1)
        output: torch.Tensor = mixed + self.ffw_down(gate + value)
        return output


def block_builder(backend: str, layers: Layers) -> samu_bench.ModuleBuilder:
    """Builds the residual block of a row on `backend` with `layers` (the row's backend
    field carries the variant's name only)."""

    def build(case: samu_bench.CaseSpec, row: samu_bench.Row, device: torch.device) -> nn.Module:
        config = BlockConfig(
            width=case.width,
            rnn_width=case.rnn_width,
            depth=case.depth,
            architecture=row.architecture,  # type: ignore[arg-type]  # a reference row's
            backend=backend,
            controller=row.controller,
            layers=layers,
        )
        return ResidualBlock(config, device=device)

    return build


def build_matmuls(
    case: samu_bench.CaseSpec, row: samu_bench.Row, device: torch.device
) -> nn.Module:
    """The `BlockMatmuls` of `case` (the protocol's module builder)."""
    return BlockMatmuls(case, device)


def case_rows(
    case: samu_bench.CaseSpec, *, on_cuda: bool, skip_compile: bool
) -> list[samu_bench.Row]:
    """Every variant of every default row of `case`, then the matmul floor row."""
    rows = []
    for base in default_rows(case.name, on_cuda=on_cuda):
        for variant in VARIANTS:
            if variant.compiled and skip_compile:
                continue
            rows.append(
                samu_bench.Row(
                    base.architecture,
                    base.backend + variant.suffix,
                    base.controller,
                    compiled=variant.compiled,
                    build_module=block_builder(base.backend, variant.layers),
                )
            )
    rows.append(
        samu_bench.Row(MATMUL_ARCHITECTURE, "cublas_bf16", None, build_module=build_matmuls)
    )
    return rows


def say(message: str) -> None:
    """Progress on stdout, flushed at once (the run is watched remotely)."""
    print(message, flush=True)


class Progress:
    """Prints every warm-up step (compilation shows as a slow first one) and every row's
    last sample, with the time since the case started."""

    def __init__(self, samples: int) -> None:
        self._samples = samples
        self._start = time.perf_counter()

    def __call__(self, event: samu_bench.StepEvent) -> None:
        elapsed = time.perf_counter() - self._start
        if event.phase == "warmup":
            say(f"  [{elapsed:7.1f} s] {event.row}: warm-up step {event.index + 1}")
        elif event.index == self._samples - 1:
            say(f"  [{elapsed:7.1f} s] {event.row}: {self._samples} samples done")


def synchronize(device: torch.device) -> None:
    """Wait for the device (CUDA only)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def allocated_bytes(device: torch.device) -> int | None:
    """Bytes allocated by the CUDA caching allocator; None off CUDA."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


@contextmanager
def saved_storage_bytes(excluded: Sequence[torch.Tensor]) -> Iterator[dict[int, int]]:
    """Collect `{storage pointer: bytes}` of every tensor saved for the backward inside
    the block, but the storages of `excluded` (which exist before the forward)."""
    existing = {tensor.untyped_storage().data_ptr() for tensor in excluded}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in existing:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    def unpack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield storages


def forward_memory(
    case: samu_bench.CaseSpec, row: samu_bench.Row, device: torch.device, seed: int
) -> dict[str, Any]:
    """Bytes held after one forward (output included) and bytes saved for the backward."""
    torch.manual_seed(seed)
    module = row.build_module(case, row, device)
    forward: Callable[[torch.Tensor], torch.Tensor] = (
        samu_bench.compile_apart(module, row.label) if row.compiled else module
    )
    x = torch.randn(case.input_shape, device=device, requires_grad=True)

    def run() -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return forward(x)

    run()  # compiles a compiled row; makes the first allocations of an eager one
    gc.collect()
    synchronize(device)
    before = allocated_bytes(device)
    output = run()
    synchronize(device)
    after = allocated_bytes(device)
    del output
    saved: int | None
    error = None
    try:
        with saved_storage_bytes([x, *module.parameters()]) as storages:
            output = run()
        saved = sum(storages.values())
        del output
    except Exception as caught:  # a compiled forward may refuse the hooks; record why
        saved, error = None, f"{type(caught).__name__}: {str(caught).splitlines()[0]}"
    held = None if before is None or after is None else after - before
    return {"held_after_forward_bytes": held, "saved_for_backward_bytes": saved, "error": error}


def adamw_step_ms(
    case: samu_bench.CaseSpec,
    row: samu_bench.Row,
    device: torch.device,
    settings: samu_bench.ProtocolSettings,
) -> float:
    """Median time of fused AdamW alone on the block's parameters (random gradients)."""
    torch.manual_seed(settings.seed)
    module = row.build_module(case, row, device)
    parameters = list(module.parameters())
    for parameter in parameters:
        parameter.grad = torch.randn_like(parameter)
    optimizer = torch.optim.AdamW(parameters, fused=True)
    for _ in range(settings.warmup):
        optimizer.step()
    timer = timer_for(device)
    return statistics.median(timer.time_ms(optimizer.step) for _ in range(settings.samples))


def free_device_memory(device: torch.device) -> None:
    """Drop the previous case's tensors and compiled graphs (keeps dynamo's cache small)."""
    gc.collect()
    torch._dynamo.reset()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def ablate_case(
    case: samu_bench.CaseSpec,
    device: torch.device,
    settings: samu_bench.ProtocolSettings,
    *,
    skip_compile: bool,
) -> dict[str, Any]:
    """Time every row of `case`, AdamW alone and the forward memory of every row."""
    rows = case_rows(case, on_cuda=device.type == "cuda", skip_compile=skip_compile)
    say(
        f"{case.name}: B={case.batch} L={case.length} D={case.width} R={case.rnn_width}, "
        f"{len(rows)} rows"
    )
    progress = Progress(settings.samples)
    free_device_memory(device)
    entry = samu_bench.measure_case(
        samu_bench.CasePlan(case, tuple(rows)), settings, device, progress
    )
    free_device_memory(device)
    say(f"  memory probes of {len(rows)} rows")
    for row, row_entry in zip(rows, entry["rows"], strict=True):
        row_entry["forward_memory"] = forward_memory(case, row, device, settings.seed)
        free_device_memory(device)
    entry["adamw_only_ms"] = {}
    for row in rows:
        if row.architecture not in entry["adamw_only_ms"]:
            milliseconds = adamw_step_ms(case, row, device, settings)
            entry["adamw_only_ms"][row.architecture] = milliseconds
            say(f"  fused AdamW alone, {row.architecture} parameters: {milliseconds:.3f} ms")
            free_device_memory(device)
    return entry


def gigabytes(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f}"


def summary_lines(cases: Sequence[dict[str, Any]], gpu_name: str | None) -> list[str]:
    """The short table: per row median, ratio to the case's best block row of its
    architecture, peak allocated delta, % of roofline floor, forward memory."""
    header = (
        f"{'case':17} {'row':58} {'median ms':>9} {'x best':>6} {'peak GB':>7} "
        f"{'%floor':>6} {'held GB':>7} {'saved GB':>8}"
    )
    lines = [header, "-" * len(header)]
    for case in cases:
        best: dict[str, float] = {}
        for row in case["rows"]:
            median = row["optimizer_step"]["median_ms"]
            best[row["architecture"]] = min(best.get(row["architecture"], median), median)
        matmul_ms = None
        for row in case["rows"]:
            median = row["optimizer_step"]["median_ms"]
            floor = samu_bench.row_floor_ms(gpu_name, case, row)
            label = row_label((row["architecture"], row["backend"], row["controller"]))
            memory = row["forward_memory"]
            lines.append(
                f"{case['case']:17} {label:58} {median:9.2f} "
                f"{median / best[row['architecture']]:6.2f} "
                f"{gigabytes(row['peak_allocated_delta_bytes']):>7} "
                f"{'-' if floor is None else f'{100 * floor / median:.0f}':>6} "
                f"{gigabytes(memory['held_after_forward_bytes']):>7} "
                f"{gigabytes(memory['saved_for_backward_bytes']):>8}"
            )
            if row["architecture"] == MATMUL_ARCHITECTURE:
                matmul_ms = median
        for architecture, adamw_ms in case["adamw_only_ms"].items():
            label = f"adamw_only ({architecture} parameters)"
            lines.append(f"{case['case']:17} {label:58} {adamw_ms:9.2f}")
        matmul_adamw_ms = case["adamw_only_ms"].get(MATMUL_ARCHITECTURE)
        if matmul_ms is not None and matmul_adamw_ms is not None:
            label = "matmul fwd+bwd (matmul_only - its adamw_only)"
            lines.append(f"{case['case']:17} {label:58} {matmul_ms - matmul_adamw_ms:9.2f}")
    return lines


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="path of the JSON written")
    parser.add_argument("--samples", type=int, default=10, help="timed steps per row (10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per row (3)")
    parser.add_argument(
        "--cases",
        nargs="+",
        default=list(REFERENCE_CASES),
        choices=[*REFERENCE_CASES, samu_bench.CPU_SMOKE.name],
        help="cases to run (default: the three reference cases)",
    )
    parser.add_argument("--skip-compile", action="store_true", help="eager variants only")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    arguments = parse_arguments(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    settings = samu_bench.ProtocolSettings(samples=arguments.samples, warmup=arguments.warmup)
    environment = samu_bench.collect_environment(device)
    gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    say(f"device: {gpu_name or 'cpu'}, torch {torch.__version__}")
    start = time.perf_counter()
    cases = []
    for name in arguments.cases:
        cases.append(
            ablate_case(
                samu_bench.builtin_case(name), device, settings, skip_compile=arguments.skip_compile
            )
        )
        document = {
            "environment": environment,
            "settings": dataclasses.asdict(settings),
            "variants": [dataclasses.asdict(variant) for variant in VARIANTS],
            "cases": cases,
        }
        arguments.out.write_text(json.dumps(document, indent=1), encoding="utf-8")
        say(f"  wrote {arguments.out} after {time.perf_counter() - start:.0f} s")
    print("\n".join(summary_lines(cases, gpu_name)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
