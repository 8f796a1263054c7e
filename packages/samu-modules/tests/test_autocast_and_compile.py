"""bf16 autocast semantics on the CPU, and torch.compile of the block."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from modules_testing import (
    LAYER_VARIANTS,
    WIDTH,
    random_block,
    relative_error,
    segment_positions,
    tiny_config,
)

import samu_kernels
from samu_modules import BlockConfig, Layers, ResidualBlock

BF16_TOLERANCE = 3e-2


def scan_input_dtypes(monkeypatch: pytest.MonkeyPatch, name: str) -> list[torch.dtype]:
    """Record the dtypes of the [B, L, R] tensors the block passes to `samu_kernels.<name>`."""
    seen: list[torch.dtype] = []
    scan = getattr(samu_kernels, name)

    def spy(*args: Any, **kwargs: Any) -> samu_kernels.ScanOutput:
        seen.extend(arg.dtype for arg in args if isinstance(arg, torch.Tensor) and arg.ndim == 3)
        result: samu_kernels.ScanOutput = scan(*args, **kwargs)
        return result

    monkeypatch.setattr(samu_kernels, name, spy)
    return seen


@pytest.mark.parametrize("layers", LAYER_VARIANTS)
@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_bf16_autocast(architecture: str, layers: Layers, monkeypatch: pytest.MonkeyPatch) -> None:
    block = random_block(tiny_config(architecture, layers=layers))  # type: ignore[arg-type]
    torch.manual_seed(0)
    x = torch.randn(2, 9, WIDTH)
    segment_pos = segment_positions(9, [[4], []])
    expected = block(x, segment_pos)
    expected_grads = torch.autograd.grad(expected.sum(), list(block.parameters()))

    seen = scan_input_dtypes(monkeypatch, f"{architecture}_scan")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, state = block(x, segment_pos, return_state=True)
    grads = torch.autograd.grad(output.sum(), list(block.parameters()))

    assert seen
    assert set(seen) == {torch.bfloat16}
    assert output.dtype == torch.float32
    assert state.h.dtype == torch.float32
    assert all(parameter.dtype == torch.float32 for parameter in block.parameters())
    assert relative_error(output, expected) < BF16_TOLERANCE
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert grad.dtype == torch.float32
        assert relative_error(grad, expected_grad) < 10 * BF16_TOLERANCE


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_bf16_autocast_streaming(architecture: str) -> None:
    block = random_block(tiny_config(architecture))  # type: ignore[arg-type]
    torch.manual_seed(1)
    x = torch.randn(2, 10, WIDTH)
    segment_pos = segment_positions(10, [[2, 8], [6]])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        whole = block(x, segment_pos)
        first, state = block(x[:, :6], segment_pos[:, :6], return_state=True)
        second = block(x[:, 6:], segment_pos[:, 6:], state)
    assert state.conv.dtype == torch.bfloat16
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)


def test_float64_block_runs_on_the_reference_backend() -> None:
    config: BlockConfig = tiny_config("samu")
    block = random_block(config, dtype=torch.float64)
    x = torch.randn(2, 5, WIDTH, dtype=torch.float64)
    output, state = block(x, return_state=True)
    assert output.dtype == torch.float64
    assert state.h.dtype == torch.float64
    block(x, state=state)


def compile_recording_ops(block: ResidualBlock, ops: list[str]) -> torch.nn.Module:
    """`torch.compile(block, fullgraph=True)` on aot_eager; appends the graph's ops to `ops`."""
    aot_eager = torch._dynamo.lookup_backend("aot_eager")

    def recording_backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        ops.extend(str(node.target) for node in graph.graph.nodes if node.op == "call_function")
        return aot_eager(graph, example_inputs)

    compiled: torch.nn.Module = torch.compile(block, backend=recording_backend, fullgraph=True)
    return compiled


@pytest.mark.parametrize("layers", ["auto", "torch"])
@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_torch_compile_on_cpu(architecture: str, layers: Layers) -> None:
    """fullgraph compiles, and "auto" gives the compiler the PyTorch layers even where
    eager mode runs the fused ones (TRITON_INTERPRET=1 here). The fused ops are compiled
    on the GPU only (test_gpu): the Triton interpreter cannot run on fake tensors."""
    torch._dynamo.reset()
    block = random_block(tiny_config(architecture, layers=layers))  # type: ignore[arg-type]
    ops: list[str] = []
    compiled = compile_recording_ops(block, ops)
    torch.manual_seed(2)
    x = torch.randn(2, 6, WIDTH, requires_grad=True)
    segment_pos = segment_positions(6, [[3], []])
    expected = block(x, segment_pos)
    output = compiled(x, segment_pos)
    fused_ops = [op for op in ops if "rms_norm" in op or "gelu_tanh" in op]
    assert not fused_ops
    assert relative_error(output, expected) < 1e-5
    grad = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, [x, *block.parameters()], grad)
    grads = torch.autograd.grad(output, [x, *block.parameters()], grad)
    for got, want in zip(grads, expected_grads, strict=True):
        assert relative_error(got, want) < 1e-5
