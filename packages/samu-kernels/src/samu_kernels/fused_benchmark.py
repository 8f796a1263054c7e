"""GPU micro-benchmark of the fused elementwise ops of the Griffin block.

For each reference shape (tokens N, width D; the MLP's hidden width F = 3 D) and each op, times
one forward + backward of three variants: the eager PyTorch composition (the ``naive``
references), ``torch.compile`` of that composition, and the fused Triton op. Reports time,
achieved bandwidth over the minimal bytes the op must move, its fraction of the measured copy
bandwidth, and speed-ups; writes everything as JSON to ``--out``.

Run: ``python -m samu_kernels.fused_benchmark --out fused.json`` (needs a CUDA GPU).
"""

from __future__ import annotations

import argparse
import json
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from triton.testing import do_bench

from samu_kernels.benchmark import provenance
from samu_kernels.gated_gelu import gelu_tanh, gelu_tanh_gate
from samu_kernels.gated_gelu.naive import gelu_tanh_gate_naive, gelu_tanh_naive
from samu_kernels.result_file import add_result_file_options, refuse_unwritable_result_file
from samu_kernels.rmsnorm import add_rms_norm, rms_norm
from samu_kernels.rmsnorm.naive import add_rms_norm_naive, rms_norm_naive

SHAPES = ((8192, 2048), (8192, 2560), (32768, 1536))
"""(N tokens, D width) of the reference cases: B * L and D."""

MLP_EXPANSION = 3
VARIANTS = ("eager", "compiled", "fused")

StepFunction = Callable[..., Sequence[torch.Tensor]]


@dataclass(frozen=True)
class Workload:
    """One op at one shape: its inputs, output gradients, implementations and byte count."""

    op: str
    rows: int
    width: int
    inputs: list[torch.Tensor]
    """Leaves of the step (the differentiable ones have ``requires_grad``)."""
    output_grads: list[torch.Tensor]
    naive: StepFunction
    fused: StepFunction
    minimal_bytes: int
    """Bytes a forward + backward must read and write at least (inputs, outputs, saved rstd)."""


def _randn(rows: int, width: int, dtype: torch.dtype, grad: bool = True) -> torch.Tensor:
    return torch.randn(rows, width, device="cuda", dtype=dtype).requires_grad_(grad)


def _scale(width: int) -> torch.Tensor:
    return (0.1 * torch.randn(width, device="cuda")).requires_grad_()


def rms_norm_workload(rows: int, width: int) -> Workload:
    """RMSNorm_1: float32 residual stream in, bfloat16 out for the following matmuls."""
    bf16 = torch.bfloat16
    # fwd: x (4) + y (2); bwd: dy (2) + x (4) + dx (4) bytes per element; rstd 4 B per row
    # written and read; scale 4 B per column read twice, its gradient written once.
    return Workload(
        op="rms_norm",
        rows=rows,
        width=width,
        inputs=[_randn(rows, width, torch.float32), _scale(width)],
        output_grads=[_randn(rows, width, bf16, grad=False)],
        naive=lambda x, scale: (rms_norm_naive(x, scale, out_dtype=bf16),),
        fused=lambda x, scale: (rms_norm(x, scale, out_dtype=bf16),),
        minimal_bytes=16 * rows * width + 8 * rows + 12 * width,
    )


def add_rms_norm_workload(rows: int, width: int) -> Workload:
    """RMSNorm_2 after the residual add: bfloat16 branch output + float32 residual."""
    bf16 = torch.bfloat16
    # fwd: x (2) + residual (4) + s (4) + y (2); bwd: dy (2) + ds (4) + s (4) + dx (2) +
    # dresidual (4) bytes per element; rstd and scale as for rms_norm.
    return Workload(
        op="add_rms_norm",
        rows=rows,
        width=width,
        inputs=[_randn(rows, width, bf16), _randn(rows, width, torch.float32), _scale(width)],
        output_grads=[_randn(rows, width, torch.float32, grad=False), _randn(rows, width, bf16)],
        naive=lambda x, residual, scale: add_rms_norm_naive(x, residual, scale, out_dtype=bf16),
        fused=lambda x, residual, scale: add_rms_norm(x, residual, scale, out_dtype=bf16),
        minimal_bytes=28 * rows * width + 8 * rows + 12 * width,
    )


def gelu_tanh_gate_workload(rows: int, width: int) -> Workload:
    """The MLP's gelu_tanh(gate) * value at hidden width F = 3 D, bfloat16."""
    hidden = MLP_EXPANSION * width
    bf16 = torch.bfloat16
    # fwd: gate, value, out; bwd: dout, gate, value, dgate, dvalue: 8 tensors of 2 B.
    return Workload(
        op="gelu_tanh_gate",
        rows=rows,
        width=hidden,
        inputs=[_randn(rows, hidden, bf16), _randn(rows, hidden, bf16)],
        output_grads=[_randn(rows, hidden, bf16, grad=False)],
        naive=lambda gate, value: (gelu_tanh_gate_naive(gate, value),),
        fused=lambda gate, value: (gelu_tanh_gate(gate, value),),
        minimal_bytes=16 * rows * hidden,
    )


def gelu_tanh_workload(rows: int, width: int) -> Workload:
    """The RecurrentBlock's y = gelu_tanh(linear_y(h)) at width R = D, bfloat16."""
    bf16 = torch.bfloat16
    # fwd: x, out; bwd: dout, x, dx: 5 tensors of 2 B.
    return Workload(
        op="gelu_tanh",
        rows=rows,
        width=width,
        inputs=[_randn(rows, width, bf16)],
        output_grads=[_randn(rows, width, bf16, grad=False)],
        naive=lambda x: (gelu_tanh_naive(x),),
        fused=lambda x: (gelu_tanh(x),),
        minimal_bytes=10 * rows * width,
    )


WORKLOADS = (rms_norm_workload, add_rms_norm_workload, gelu_tanh_gate_workload, gelu_tanh_workload)


def _relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref64 = ref.detach().double()
    return float((out.detach().double() - ref64).norm() / ref64.norm())


def _time_step(function: StepFunction, workload: Workload, warmup_ms: int, rep_ms: int) -> float:
    """Median milliseconds of one forward + backward of ``function`` on ``workload``."""
    differentiable = [t for t in workload.inputs if t.requires_grad]

    def step() -> None:
        outputs = function(*workload.inputs)
        torch.autograd.backward(list(outputs), workload.output_grads)

    milliseconds = do_bench(
        step, warmup=warmup_ms, rep=rep_ms, grad_to_none=differentiable, return_mode="median"
    )
    return float(milliseconds)


def copy_bandwidth_gbps(warmup_ms: int, rep_ms: int) -> float:
    """Device-to-device copy bandwidth (read + write) of a 1 GiB buffer, in GB/s."""
    source = torch.empty(2**28, device="cuda", dtype=torch.float32)
    target = torch.empty_like(source)
    milliseconds = float(
        do_bench(lambda: target.copy_(source), warmup=warmup_ms, rep=rep_ms, return_mode="median")
    )
    return 2 * source.nbytes / milliseconds / 1e6


def run_workload(
    workload: Workload, copy_gbps: float, warmup_ms: int, rep_ms: int
) -> dict[str, Any]:
    """Time the three variants of ``workload``; return its JSON record."""
    torch._dynamo.reset()
    functions: dict[str, StepFunction] = {
        "eager": workload.naive,
        "compiled": torch.compile(workload.naive, fullgraph=True, dynamic=False),
        "fused": workload.fused,
    }
    with torch.no_grad():
        fused_outputs = workload.fused(*workload.inputs)
        eager_outputs = workload.naive(*workload.inputs)
    record: dict[str, Any] = {
        "op": workload.op,
        "rows": workload.rows,
        "width": workload.width,
        "minimal_bytes": workload.minimal_bytes,
        "fused_vs_eager_rel_err": max(
            _relative_error(out, ref) for out, ref in zip(fused_outputs, eager_outputs, strict=True)
        ),
    }
    for variant, function in functions.items():
        milliseconds = _time_step(function, workload, warmup_ms, rep_ms)
        gbps = workload.minimal_bytes / milliseconds / 1e6
        record[variant] = {"ms": milliseconds, "gbps": gbps, "fraction_of_copy": gbps / copy_gbps}
    record["speedup_vs_eager"] = record["eager"]["ms"] / record["fused"]["ms"]
    record["speedup_vs_compiled"] = record["compiled"]["ms"] / record["fused"]["ms"]
    return record


def _print_record(record: dict[str, Any]) -> None:
    label = f"{record['op']:<15} N={record['rows']:<6} width={record['width']:<6}"
    timings = "  ".join(
        f"{variant} {record[variant]['ms']:7.3f} ms {record[variant]['gbps']:6.0f} GB/s "
        f"({100 * record[variant]['fraction_of_copy']:3.0f}%)"
        for variant in VARIANTS
    )
    print(
        f"{label} {timings}  x{record['speedup_vs_eager']:.2f} vs eager, "
        f"x{record['speedup_vs_compiled']:.2f} vs compiled, "
        f"rel err {record['fused_vs_eager_rel_err']:.1e}",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, run every workload at every shape, print a table and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_result_file_options(parser, default=Path("fused_benchmark.json"))
    parser.add_argument("--warmup-ms", type=int, default=25)
    parser.add_argument("--rep-ms", type=int, default=200)
    args = parser.parse_args(argv)
    refuse_unwritable_result_file(parser, args.out, force=args.force)
    if args.warmup_ms < 0 or args.rep_ms < 1:
        parser.error(
            f"--warmup-ms must be >= 0 and --rep-ms >= 1, got {args.warmup_ms} and {args.rep_ms}"
        )
    if not torch.cuda.is_available():
        raise SystemExit("fused_benchmark needs a CUDA GPU")

    copy_gbps = copy_bandwidth_gbps(args.warmup_ms, args.rep_ms)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {copy_gbps:.0f} GB/s", flush=True)
    records = []
    for rows, width in SHAPES:
        for make_workload in WORKLOADS:
            record = run_workload(
                make_workload(rows, width), copy_gbps, args.warmup_ms, args.rep_ms
            )
            _print_record(record)
            records.append(record)
            torch.cuda.empty_cache()
    result = {
        **provenance(torch.device("cuda")),
        "python": platform.python_version(),
        "copy_bandwidth_gbps": copy_gbps,
        "timing": "median of triton.testing.do_bench (L2 flushed), forward + backward",
        "results": records,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
