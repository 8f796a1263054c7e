"""The compiled MLP's forward + backward: our MLPBlock against the plain PyTorch composition.

`samu_modules.MLPBlock` computes the `ffw_up` bias gradient as a matrix product
(`samu_modules.linear`), so that Inductor does not fuse that column sum into the GELU-gate
backward (profiled on the H200 at 1.29-1.34 ms for 400m_block_long, 3.6x its bytes at copy
bandwidth). This times both under `torch.compile` and bf16 autocast on the reference cases'
MLP shapes ([B * L tokens, width] -> 2 x mlp_width -> width), median of
`triton.testing.do_bench` (the input's and parameters' gradients reset between
repetitions), in one run:

    PYTHONPATH=$(echo packages/*/src | tr ' ' :) python scripts/bench_mlp_backward.py

Prediction (docs/performance.md): about 0.7 ms faster on 400m_block_long, 0.2 ms on
state2560_medium, no change on state2048_short (where Inductor does not fuse the sum).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from samu_bench.catalog import REFERENCE_TOKENS
from samu_modules import BlockConfig, MLPBlock


def plain_mlp(mlp: MLPBlock) -> Callable[[torch.Tensor], torch.Tensor]:
    """The PyTorch composition a user would write, on the same parameters."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        gate, value = mlp.ffw_up(x).chunk(2, dim=-1)
        hidden = nn.functional.gelu(gate, approximate="tanh") * value
        output: torch.Tensor = mlp.ffw_down(hidden)
        return output

    return forward


def time_step(
    forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, mlp: MLPBlock
) -> float:
    """Median ms of one compiled forward + backward of `forward` (on `mlp`'s parameters)
    under bf16 autocast."""
    from triton.testing import do_bench  # noqa: PLC0415 (GPU only)

    compiled = torch.compile(forward)
    grad = torch.randn(x.shape, device=x.device, dtype=torch.bfloat16)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            output = compiled(x)
        torch.autograd.backward(output, grad)

    for _ in range(3):
        step()
    leaves = [x, *mlp.parameters()]
    return float(do_bench(step, grad_to_none=leaves, return_mode="median"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, help="also write the times as JSON")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_mlp_backward needs a CUDA GPU")
        return 2
    results = []
    for case, (batch, length) in REFERENCE_TOKENS.items():
        config = BlockConfig.from_case(case, architecture="samu")
        tokens, width = batch * length, config.width
        torch.manual_seed(0)
        mlp = MLPBlock(width, config.mlp_width, device="cuda")
        x = torch.randn(1, tokens, width, device="cuda", requires_grad=True)
        torch._dynamo.reset()
        ours = time_step(mlp, x, mlp)
        torch._dynamo.reset()
        plain = time_step(plain_mlp(mlp), x, mlp)
        results.append({"case": case, "tokens": tokens, "width": width, "ours_ms": ours,
                        "plain_ms": plain})  # fmt: skip
        print(f"{case:18s} ours {ours:7.3f} ms  plain {plain:7.3f} ms  ratio {ours / plain:.3f}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
