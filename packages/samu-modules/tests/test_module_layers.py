"""The layers against float64 loop references."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from modules_testing import dense_block_diagonal, relative_error, segment_positions

from samu_modules import BlockDiagonalLinear, Conv1D, MLPBlock, RMSNorm
from samu_modules.linear import linear_matmul_bias_grad
from samu_modules.mlp import split_linear

TOLERANCE = 1e-6


def conv_loop_reference(
    conv: Conv1D, x: torch.Tensor, segment_pos: torch.Tensor | None
) -> torch.Tensor:
    """out[b, t] = b + sum_s w[W-1-s] x[b, t-s] over taps inside t's document, in float64."""
    x64, w64, b64 = x.double(), conv.w.double(), conv.b.double()
    batch, length, _ = x.shape
    document = (
        torch.zeros(batch, length, dtype=torch.long)
        if segment_pos is None
        else torch.cumsum(segment_pos == 0, dim=1)
    )
    output = b64.expand(batch, length, -1).clone()
    for row in range(batch):
        for t in range(length):
            for shift in range(conv.temporal_width):
                source = t - shift
                if source >= 0 and document[row, source] == document[row, t]:
                    output[row, t] += w64[conv.temporal_width - 1 - shift] * x64[row, source]
    return output


def random_conv(width: int, temporal_width: int = 4) -> Conv1D:
    conv = Conv1D(width, temporal_width)
    with torch.no_grad():
        conv.w.normal_()
        conv.b.normal_()
    return conv


@pytest.mark.parametrize("temporal_width", [1, 2, 4])
@pytest.mark.parametrize("with_resets", [False, True])
def test_conv_matches_loop_reference(temporal_width: int, with_resets: bool) -> None:
    torch.manual_seed(0)
    conv = random_conv(12, temporal_width)
    x = torch.randn(3, 11, 12)
    segment_pos = segment_positions(11, [[1, 2, 7], [10], []]) if with_resets else None
    output, state = conv(x, segment_pos)
    assert output.shape == x.shape
    assert state.shape == (3, temporal_width - 1, 12)
    assert relative_error(output, conv_loop_reference(conv, x, segment_pos)) < TOLERANCE


def test_conv_state_masks_finished_documents() -> None:
    torch.manual_seed(1)
    conv = random_conv(5)
    x = torch.randn(2, 6, 5)
    segment_pos = segment_positions(6, [[4], [5]])
    _, state = conv(x, segment_pos)
    torch.testing.assert_close(state[0], torch.cat([torch.zeros(1, 5), x[0, 4:]]))
    torch.testing.assert_close(state[1], torch.cat([torch.zeros(2, 5), x[1, 5:]]))


@pytest.mark.parametrize("split", [1, 2, 3, 5, 8])
def test_conv_in_pieces_equals_one_pass(split: int) -> None:
    torch.manual_seed(2)
    conv = random_conv(7)
    x = torch.randn(2, 9, 7)
    segment_pos = segment_positions(9, [[3, 5], [split]])
    whole, whole_state = conv(x, segment_pos)
    first, state = conv(x[:, :split], segment_pos[:, :split])
    second, last_state = conv(x[:, split:], segment_pos[:, split:], state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)
    torch.testing.assert_close(last_state, whole_state)


def test_conv_in_bfloat16_matches_loop_reference() -> None:
    """A bfloat16 input is convolved in bfloat16 (float32 arithmetic per tap)."""
    torch.manual_seed(7)
    conv = random_conv(12)
    x = torch.randn(3, 11, 12)
    segment_pos = segment_positions(11, [[1, 2, 7], [10], []])
    output, state = conv(x.bfloat16(), segment_pos)
    assert output.dtype == state.dtype == torch.bfloat16
    expected = conv_loop_reference(conv, x.bfloat16().float(), segment_pos)
    assert relative_error(output, expected) < 2e-2


def rms_norm_formula(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    x64 = x.double()
    return x64 / torch.sqrt(x64.square().mean(-1, keepdim=True) + 1e-6) * (1 + scale.double())


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize(("out_dtype", "tolerance"), [(None, TOLERANCE), (torch.bfloat16, 1e-2)])
def test_rms_norm_matches_formula(
    fused: bool, out_dtype: torch.dtype | None, tolerance: float
) -> None:
    torch.manual_seed(3)
    norm = RMSNorm(10)
    with torch.no_grad():
        norm.scale.normal_()
    x = torch.randn(2, 5, 10)
    output = norm(x, out_dtype, fused=fused)
    assert output.dtype == (out_dtype or torch.float32)
    assert relative_error(output, rms_norm_formula(x, norm.scale)) < tolerance


@pytest.mark.parametrize("fused", [False, True])
def test_add_and_normalize_matches_formula(fused: bool) -> None:
    """A bfloat16 branch output plus the float32 residual stream, then the norm."""
    torch.manual_seed(8)
    norm = RMSNorm(10)
    with torch.no_grad():
        norm.scale.normal_()
    branch = torch.randn(2, 5, 10).bfloat16()
    residual = torch.randn(2, 5, 10)
    residual_sum, output = norm.add_and_normalize(branch, residual, torch.bfloat16, fused=fused)
    expected_sum = branch.double() + residual.double()
    assert residual_sum.dtype == torch.float32
    assert output.dtype == torch.bfloat16
    assert relative_error(residual_sum, expected_sum) < TOLERANCE
    assert relative_error(output, rms_norm_formula(expected_sum, norm.scale)) < 1e-2


def test_block_diagonal_linear_is_a_block_diagonal_matrix() -> None:
    torch.manual_seed(4)
    layer = BlockDiagonalLinear(12, 4)
    with torch.no_grad():
        layer.b.normal_()
    x = torch.randn(2, 3, 12)
    expected = x.double() @ dense_block_diagonal(layer.w) + layer.b.double().flatten()
    assert relative_error(layer(x), expected) < TOLERANCE


@pytest.mark.parametrize("fused", [False, True])
def test_mlp_matches_formula(fused: bool) -> None:
    torch.manual_seed(5)
    mlp = MLPBlock(8, 24)
    with torch.no_grad():
        for parameter in mlp.parameters():
            parameter.normal_(std=0.3)
    x = torch.randn(2, 5, 8)
    up = x.double() @ mlp.ffw_up.weight.double().T + mlp.ffw_up.bias.double()
    gate, value = up[..., :24], up[..., 24:]
    hidden = torch.nn.functional.gelu(gate, approximate="tanh") * value
    expected = hidden @ mlp.ffw_down.weight.double().T + mlp.ffw_down.bias.double()
    assert relative_error(mlp(x, fused=fused), expected) < TOLERANCE


def test_split_linear_gives_the_two_halves_contiguous() -> None:
    torch.manual_seed(9)
    linear = torch.nn.Linear(6, 8)
    x = torch.randn(3, 6, requires_grad=True)
    first, second = split_linear(x, linear)
    assert first.is_contiguous()
    assert second.is_contiguous()
    expected = linear(x)
    torch.testing.assert_close(torch.cat([first, second], dim=-1), expected)
    grad = torch.randn_like(expected)
    got = torch.autograd.grad([first, second], [x, linear.weight, linear.bias], grad.chunk(2, -1))
    want = torch.autograd.grad(expected, [x, linear.weight, linear.bias], grad)
    for got_grad, want_grad in zip(got, want, strict=True):
        torch.testing.assert_close(got_grad, want_grad)


def test_initialisation_zeros_and_ring() -> None:
    torch.manual_seed(6)
    conv = Conv1D(4096)
    assert torch.count_nonzero(conv.b) == 0
    assert conv.w.std().item() == pytest.approx((0.01 / 4) ** 0.5, rel=0.05)
    assert torch.count_nonzero(RMSNorm(8).scale) == 0
    layer = BlockDiagonalLinear(256, 4)
    assert torch.count_nonzero(layer.b) == 0
    assert layer.w.std().item() == pytest.approx((1 / 64) ** 0.5, rel=0.05)


@pytest.mark.parametrize("x_needs_grad", [True, False])
def test_linear_matmul_bias_grad_matches_linear(x_needs_grad: bool) -> None:
    torch.manual_seed(10)
    linear = torch.nn.Linear(6, 8).double()
    x = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=x_needs_grad)
    got = linear_matmul_bias_grad(x, linear.weight, linear.bias)
    expected = linear(x)
    assert relative_error(got, expected) < TOLERANCE
    grad = torch.randn_like(expected)
    inputs = [linear.weight, linear.bias] + ([x] if x_needs_grad else [])
    for got_grad, want_grad in zip(
        torch.autograd.grad(got, inputs, grad),
        torch.autograd.grad(expected, inputs, grad),
        strict=True,
    ):
        assert relative_error(got_grad, want_grad) < TOLERANCE


def test_linear_matmul_bias_grad_under_bf16_autocast() -> None:
    torch.manual_seed(11)
    linear = torch.nn.Linear(16, 8)
    x = torch.randn(3, 4, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = linear_matmul_bias_grad(x, linear.weight, linear.bias)
    assert output.dtype == torch.bfloat16
    output.float().square().sum().backward()
    assert linear.weight.grad is not None
    assert linear.bias.grad is not None
    assert linear.weight.grad.dtype == torch.float32
    expected = 2 * (x.double() @ linear.weight.double().T + linear.bias.double())
    assert relative_error(linear.bias.grad, expected.sum((0, 1))) < 2e-2


def test_compiled_mlp_backward_takes_the_bias_gradient_from_a_matrix_product() -> None:
    # Inductor would fuse a column sum into the GELU-gate backward (slow on the GPU); a
    # product with a ones row stays a matmul of its own.
    from functorch.compile import make_boxed_func  # noqa: PLC0415
    from torch._dynamo.backends.common import aot_autograd  # noqa: PLC0415

    backward_ops: list[str] = []

    def forward_compiler(graph: torch.fx.GraphModule, _: object) -> Any:
        return make_boxed_func(graph)

    def backward_compiler(graph: torch.fx.GraphModule, _: object) -> Any:
        backward_ops.extend(str(n.target) for n in graph.graph.nodes if n.op == "call_function")
        return make_boxed_func(graph)

    torch._dynamo.reset()
    mlp = MLPBlock(8, 24)
    backend = aot_autograd(fw_compiler=forward_compiler, bw_compiler=backward_compiler)
    compiled = torch.compile(mlp, backend=backend, fullgraph=True)
    x = torch.randn(2, 5, 8, requires_grad=True)
    compiled(x).sum().backward()
    assert "aten.new_ones.default" in backward_ops
    assert backward_ops.count("aten.mm.default") == 5  # 2 per linear, + the ffw_up bias
    assert backward_ops.count("aten.sum.dim_IntList") == 1  # the ffw_down bias only
