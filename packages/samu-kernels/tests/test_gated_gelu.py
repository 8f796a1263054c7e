"""GELU-gated product and tanh GELU against the float64 reference, forward and backward."""

from __future__ import annotations

import pytest
import torch

from samu_kernels.fused_dispatch import triton_enabled
from samu_kernels.gated_gelu import gelu_tanh, gelu_tanh_gate
from samu_kernels.gated_gelu.naive import gelu_tanh_gate_naive, gelu_tanh_naive
from samu_kernels.gated_gelu.ops import (
    gelu_tanh_forward,
    gelu_tanh_gate_forward,
    launch_gelu_tanh_backward,
    launch_gelu_tanh_forward,
)

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# Tolerances on ||out - ref|| / ||ref|| by the dtype the result is stored in.
TOLERANCE = {torch.float32: 2e-6, torch.bfloat16: 1e-2}
# [..., F]: F not a power of two; (3, 37, 41) spans two programs with a masked tail.
CPU_SHAPES = [(3, 37, 41), (7, 5), (100,)]
GPU_SHAPES = [(8192, 6144), (1, 8191, 7680), (4099, 4608), (10007, 100)]


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` in float64."""
    ref = ref.detach().double()
    return float((out.detach().double() - ref).norm() / ref.norm())


def random_tensor(
    shape: tuple[int, ...], dtype: torch.dtype, seed: int, spread: float = 2.0
) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator) * spread).to(device=DEVICE, dtype=dtype)


def leaves(*tensors: torch.Tensor, double: bool = False) -> list[torch.Tensor]:
    return [
        (t.detach().double() if double else t.detach().clone()).requires_grad_() for t in tensors
    ]


def check_gelu_tanh_gate(shape: tuple[int, ...], dtype: torch.dtype, spread: float = 2.0):
    gate = random_tensor(shape, dtype, seed=0, spread=spread)
    value = random_tensor(shape, dtype, seed=1)
    dout = random_tensor(shape, dtype, seed=2)

    gate_k, value_k = leaves(gate, value)
    out = gelu_tanh_gate(gate_k, value_k)
    out.backward(dout)
    gate_r, value_r = leaves(gate, value, double=True)
    out_ref = gelu_tanh_gate_naive(gate_r, value_r)
    out_ref.backward(dout.double())

    assert out.dtype == dtype
    assert gate_k.grad is not None
    assert value_k.grad is not None
    assert (gate_k.grad.dtype, value_k.grad.dtype) == (dtype, dtype)
    assert relative_error(out, out_ref) < TOLERANCE[dtype]
    assert relative_error(gate_k.grad, gate_r.grad) < TOLERANCE[dtype]
    assert relative_error(value_k.grad, value_r.grad) < TOLERANCE[dtype]


def check_gelu_tanh(shape: tuple[int, ...], dtype: torch.dtype, spread: float = 2.0):
    x = random_tensor(shape, dtype, seed=0, spread=spread)
    dout = random_tensor(shape, dtype, seed=2)

    (x_k,) = leaves(x)
    out = gelu_tanh(x_k)
    out.backward(dout)
    (x_r,) = leaves(x, double=True)
    out_ref = gelu_tanh_naive(x_r)
    out_ref.backward(dout.double())

    assert out.dtype == dtype
    assert x_k.grad is not None
    assert x_k.grad.dtype == dtype
    assert relative_error(out, out_ref) < TOLERANCE[dtype]
    assert relative_error(x_k.grad, x_r.grad) < TOLERANCE[dtype]


@pytest.mark.parametrize("shape", CPU_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("spread", [2.0, 12.0])
def test_gelu_tanh_gate_matches_reference(shape, dtype, spread):
    check_gelu_tanh_gate(shape, dtype, spread)


@pytest.mark.parametrize("shape", CPU_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("spread", [2.0, 12.0])
def test_gelu_tanh_matches_reference(shape, dtype, spread):
    check_gelu_tanh(shape, dtype, spread)


@pytest.mark.parametrize("gated", [False, True])
def test_kernels_write_every_output_element(gated):
    """Launchers fill NaN-poisoned buffers completely and correctly."""
    shape = (3, 37, 41)
    x = random_tensor(shape, torch.bfloat16, seed=0)
    value = random_tensor(shape, torch.bfloat16, seed=1) if gated else None
    dout = random_tensor(shape, torch.bfloat16, seed=2)
    out = torch.full(shape, float("nan"), device=DEVICE, dtype=torch.bfloat16)
    dx = torch.full_like(out, float("nan"))
    dvalue = torch.full_like(out, float("nan")) if gated else None
    launch_gelu_tanh_forward(x, value, out=out)
    launch_gelu_tanh_backward(dout, x, value, dx=dx, dvalue=dvalue)

    x_r = x.double().requires_grad_()
    out_ref = torch.nn.functional.gelu(x_r, approximate="tanh")
    if value is not None:
        out_ref = out_ref * value.double()
    out_ref.backward(dout.double())

    assert all(bool(t.isfinite().all()) for t in (out, dx, dvalue) if t is not None)
    assert relative_error(out, out_ref) < TOLERANCE[torch.bfloat16]
    assert relative_error(dx, x_r.grad) < TOLERANCE[torch.bfloat16]
    if value is not None and dvalue is not None:
        gelu_ref = torch.nn.functional.gelu(x.double(), approximate="tanh")
        assert relative_error(dvalue, dout.double() * gelu_ref) < TOLERANCE[torch.bfloat16]


def test_gradients_are_bit_reproducible():
    gate = random_tensor((3, 37, 41), torch.float32, seed=0)
    value = random_tensor((3, 37, 41), torch.float32, seed=1)
    grads = []
    for _ in range(2):
        gate_k, value_k = leaves(gate, value)
        (gelu_tanh_gate(gate_k, value_k) + gelu_tanh(gate_k)).sum().backward()
        grads.append([gate_k.grad, value_k.grad])
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))


def test_backward_saves_only_inputs():
    gate, value = leaves(
        random_tensor((3, 37, 41), torch.bfloat16, seed=0),
        random_tensor((3, 37, 41), torch.bfloat16, seed=1),
    )
    saved: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        gelu_tanh_gate(gate, value)
        gelu_tanh(gate)
    assert [t.data_ptr() for t in saved] == [gate.data_ptr(), value.data_ptr(), gate.data_ptr()]


def test_empty_input():
    gate = torch.empty(0, 41, device=DEVICE, requires_grad=True)
    out = gelu_tanh_gate(gate, torch.empty(0, 41, device=DEVICE))
    out.sum().backward()
    assert out.shape == gate.shape
    assert gelu_tanh(gate).shape == gate.shape


def test_non_contiguous_input():
    gate = random_tensor((41, 37), torch.float32, seed=0).t()
    value = random_tensor((37, 41), torch.float32, seed=1)
    reference = gelu_tanh_gate_naive(gate.double(), value.double())
    assert relative_error(gelu_tanh_gate(gate, value), reference) < TOLERANCE[torch.float32]


def test_cpu_without_interpreter_falls_back_to_reference(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    gate = torch.randn(9, 37)
    value = torch.randn(9, 37)
    assert not triton_enabled(gate)
    assert torch.equal(gelu_tanh_gate(gate, value), gelu_tanh_gate_naive(gate, value))
    assert torch.equal(gelu_tanh(gate), gelu_tanh_naive(gate))


@pytest.mark.parametrize(
    ("gate", "value", "error", "match"),
    [
        (torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4), TypeError, "gate must be"),
        (torch.randn(3, 4), [1.0], TypeError, "value must be a torch.Tensor"),
        (torch.randn(3, 4), torch.randn(3, 5), ValueError, "value must have the shape"),
        (
            torch.randn(3, 4),
            torch.randn(3, 4, dtype=torch.bfloat16),
            ValueError,
            "shape and dtype of gate",
        ),
    ],
)
def test_gelu_tanh_gate_rejects_bad_input(gate, value, error, match):
    with pytest.raises(error, match=match):
        gelu_tanh_gate(gate, value)


def test_gelu_tanh_rejects_bad_input():
    with pytest.raises(TypeError, match="x must be float32 or bfloat16"):
        gelu_tanh(torch.randn(3, dtype=torch.float16))


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("shape", GPU_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_reference_gpu(shape, dtype):
    check_gelu_tanh_gate(shape, dtype)
    check_gelu_tanh(shape, dtype)


@pytest.mark.gpu
@requires_cuda
def test_torch_compile_traces_through_ops():
    def mlp_gate(h, w_gate, w_value):
        gate = h @ w_gate
        return gelu_tanh_gate(gate, h @ w_value) + gelu_tanh(gate)

    torch._dynamo.reset()
    compiled = torch.compile(mlp_gate, fullgraph=True)
    h = random_tensor((2, 333, 256), torch.bfloat16, seed=0)
    w_gate = random_tensor((256, 768), torch.bfloat16, seed=1, spread=0.1)
    w_value = random_tensor((256, 768), torch.bfloat16, seed=2, spread=0.1)
    dout = random_tensor((2, 333, 768), torch.bfloat16, seed=3)
    results = []
    for fn in (mlp_gate, compiled):
        inputs = leaves(h, w_gate, w_value)
        out = fn(*inputs)
        out.backward(dout)
        results.append([out, *(t.grad for t in inputs)])
    for eager, traced in zip(*results, strict=True):
        assert relative_error(traced, eager) < 1e-2


@pytest.mark.gpu
@requires_cuda
def test_opcheck():
    gate = random_tensor((37, 100), torch.bfloat16, seed=0).requires_grad_()
    value = random_tensor((37, 100), torch.bfloat16, seed=1).requires_grad_()
    torch.library.opcheck(gelu_tanh_gate_forward, (gate, value))
    torch.library.opcheck(gelu_tanh_forward, (gate,))
