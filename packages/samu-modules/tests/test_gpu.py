"""The block on a CUDA GPU with the Triton backends: parity, streaming, autocast, compile."""

from __future__ import annotations

import pytest
import torch
from modules_testing import (
    LAYER_VARIANTS,
    perturb_parameters_,
    relative_error,
    segment_positions,
    with_backend,
)

import samu_kernels
from samu_modules import BlockConfig, Layers, ResidualBlock

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

D, R, DEPTH, B, L = 256, 512, 4, 2, 1000  # L is not a multiple of any chunk
ROWS = [
    *samu_kernels.REFERENCE_FILE_ROWS,
    ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], "reference"),
]
ROW_IDS = [f"{architecture}-{backend}-{controller}" for architecture, backend, controller in ROWS]


def cuda_block(
    architecture: str, backend: str, controller: str | None, layers: Layers = "auto"
) -> ResidualBlock:
    torch.manual_seed(0)
    config = BlockConfig(
        D,
        R,
        DEPTH,
        architecture,  # type: ignore[arg-type]
        backend=backend,
        controller=controller,
        layers=layers,
    )
    block = ResidualBlock(config, device="cuda")
    perturb_parameters_(block, torch.Generator().manual_seed(1))
    return block


def packed_inputs(length: int = L) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(2)
    x = torch.randn(B, length, D, device="cuda")
    segment_pos = segment_positions(length, [[100, 101, 517], [999]]).cuda()
    return x, segment_pos


def outputs_and_grads(
    block: ResidualBlock, x: torch.Tensor, segment_pos: torch.Tensor, grad: torch.Tensor | None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x = x.clone().requires_grad_()
    output = block(x, segment_pos)
    grad = torch.randn_like(output) if grad is None else grad
    return output, list(torch.autograd.grad(output, [x, *block.parameters()], grad))


@pytest.mark.parametrize("layers", LAYER_VARIANTS)
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16_autocast"])
@pytest.mark.parametrize(("architecture", "backend", "controller"), ROWS, ids=ROW_IDS)
def test_triton_matches_reference_on_gpu(
    architecture: str, backend: str, controller: str | None, autocast: bool, layers: Layers
) -> None:
    """Triton scan with fused or PyTorch layers against the reference scan, PyTorch layers."""
    triton = cuda_block(architecture, backend, controller, layers)
    reference = with_backend(triton, "reference", layers="torch")
    x, segment_pos = packed_inputs()
    torch.manual_seed(3)
    grad = torch.randn(B, L, D, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        output, grads = outputs_and_grads(triton, x, segment_pos, grad)
        expected, expected_grads = outputs_and_grads(reference, x, segment_pos, grad)
    assert output.dtype == torch.float32
    tolerance = 2e-2 if autocast else 1e-4
    assert relative_error(output, expected) < tolerance
    for got, want in zip(grads, expected_grads, strict=True):
        assert relative_error(got, want) < 5 * tolerance


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16_autocast"])
@pytest.mark.parametrize(("architecture", "backend", "controller"), ROWS, ids=ROW_IDS)
def test_streaming_on_gpu(
    architecture: str, backend: str, controller: str | None, autocast: bool
) -> None:
    block = cuda_block(architecture, backend, controller)
    x, segment_pos = packed_inputs(300)
    tolerance = 2e-2 if autocast else 1e-5
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        whole = block(x, segment_pos)
        first, state = block(x[:, :101], segment_pos[:, :101], return_state=True)
        second, state = block(x[:, 101:290], segment_pos[:, 101:290], state, return_state=True)
        decoded = []
        for t in range(290, 300):
            step, state = block(
                x[:, t : t + 1], segment_pos[:, t : t + 1], state, return_state=True
            )
            decoded.append(step)
    pieces = torch.cat([first, second, *decoded], dim=1)
    assert relative_error(pieces, whole) < tolerance


@pytest.mark.parametrize("layers", ["auto", "fused"])
@pytest.mark.parametrize(("architecture", "backend", "controller"), ROWS, ids=ROW_IDS)
def test_torch_compile_fullgraph_on_gpu(
    architecture: str, backend: str, controller: str | None, layers: Layers
) -> None:
    """Inductor with the PyTorch layers ("auto") or the fused Triton ops, against eager."""
    torch._dynamo.reset()
    block = cuda_block(architecture, backend, controller, layers)
    compiled = torch.compile(block, fullgraph=True)
    x, segment_pos = packed_inputs()
    torch.manual_seed(4)
    grad = torch.randn(B, L, D, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        expected, expected_grads = outputs_and_grads(block, x, segment_pos, grad)
        output, grads = outputs_and_grads(compiled, x, segment_pos, grad)  # type: ignore[arg-type]
    assert relative_error(output, expected) < 2e-2
    for got, want in zip(grads, expected_grads, strict=True):
        assert relative_error(got, want) < 1e-1


@pytest.mark.parametrize(("architecture", "backend", "controller"), ROWS, ids=ROW_IDS)
def test_cuda_graphs_replay_on_gpu(architecture: str, backend: str, controller: str | None) -> None:
    """`mode="reduce-overhead"`: the block is captured whole (no skip) and replays correctly."""
    torch._dynamo.reset()
    skips = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
    block = cuda_block(architecture, backend, controller)
    compiled = torch.compile(block, fullgraph=True, mode="reduce-overhead")
    x, segment_pos = packed_inputs()
    torch.manual_seed(4)
    grad = torch.randn(B, L, D, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        expected, expected_grads = outputs_and_grads(block, x, segment_pos, grad)
        for _ in range(3):  # warm-up, recording, replay
            torch.compiler.cudagraph_mark_step_begin()
            output, grads = outputs_and_grads(compiled, x, segment_pos, grad)  # type: ignore[arg-type]
            assert relative_error(output, expected) < 2e-2
            for got, want in zip(grads, expected_grads, strict=True):
                assert relative_error(got, want) < 1e-1
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == skips
