"""RMSNorm and residual add + RMSNorm against the float64 reference, forward and backward."""

from __future__ import annotations

import pytest
import torch

from samu_kernels.fused_dispatch import triton_enabled
from samu_kernels.rmsnorm import add_rms_norm, rms_norm
from samu_kernels.rmsnorm.naive import add_rms_norm_naive, rms_norm_naive
from samu_kernels.rmsnorm.ops import (
    add_rms_norm_forward,
    backward_grid,
    launch_rms_norm_backward,
    launch_rms_norm_forward,
    rms_norm_forward,
)

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# Tolerances on ||out - ref|| / ||ref|| by the dtype the result is stored in.
TOLERANCE = {torch.float32: 2e-6, torch.bfloat16: 1e-2}
# [..., D]: D not a power of two, N odd, several backward programs with several tiles each.
CPU_SHAPES = [(100, 37), (3, 7, 100), (1, 257), (5, 3)]
GPU_SHAPES = [(4099, 2048), (2, 2049, 2560), (8191, 1536), (513, 8192), (10007, 100)]


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / ||ref||`` in float64."""
    ref = ref.detach().double()
    return float((out.detach().double() - ref).norm() / ref.norm())


def random_inputs(
    shape: tuple[int, ...], x_dtype: torch.dtype, device: torch.device, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=generator) * 3 + 0.5).to(device=device, dtype=x_dtype)
    scale = (torch.randn(shape[-1], generator=generator) * 0.5).to(device)
    return x, scale


def leaves(*tensors: torch.Tensor, double: bool = False) -> list[torch.Tensor]:
    return [
        (t.detach().double() if double else t.detach().clone()).requires_grad_() for t in tensors
    ]


def check_rms_norm(shape: tuple[int, ...], x_dtype: torch.dtype, out_dtype: torch.dtype | None):
    x, scale = random_inputs(shape, x_dtype, DEVICE)
    y_dtype = out_dtype or x_dtype
    dy = torch.randn(shape, device=DEVICE).to(y_dtype)

    x_k, scale_k = leaves(x, scale)
    y = rms_norm(x_k, scale_k, out_dtype=out_dtype)
    y.backward(dy)
    x_r, scale_r = leaves(x, scale, double=True)
    y_ref = rms_norm_naive(x_r, scale_r)
    y_ref.backward(dy.double())

    assert y.dtype == y_dtype
    assert y.shape == x.shape
    assert x_k.grad is not None
    assert scale_k.grad is not None
    assert x_k.grad.dtype == x_dtype
    assert scale_k.grad.dtype == torch.float32
    assert relative_error(y, y_ref) < TOLERANCE[y_dtype]
    assert relative_error(x_k.grad, x_r.grad) < TOLERANCE[x_dtype]
    assert relative_error(scale_k.grad, scale_r.grad) < TOLERANCE[torch.float32] * 10


def check_add_rms_norm(
    shape: tuple[int, ...],
    x_dtype: torch.dtype,
    residual_dtype: torch.dtype,
    out_dtype: torch.dtype | None,
):
    x, scale = random_inputs(shape, x_dtype, DEVICE)
    residual, _ = random_inputs(shape, residual_dtype, DEVICE, seed=1)
    y_dtype = out_dtype or torch.float32
    ds = torch.randn(shape, device=DEVICE)
    dy = torch.randn(shape, device=DEVICE).to(y_dtype)

    x_k, residual_k, scale_k = leaves(x, residual, scale)
    s, y = add_rms_norm(x_k, residual_k, scale_k, out_dtype=out_dtype)
    torch.autograd.backward([s, y], [ds, dy])
    x_r, residual_r, scale_r = leaves(x, residual, scale, double=True)
    s_ref, y_ref = add_rms_norm_naive(x_r, residual_r, scale_r)
    torch.autograd.backward([s_ref, y_ref], [ds.double(), dy.double()])

    assert (s.dtype, y.dtype) == (torch.float32, y_dtype)
    assert x_k.grad is not None
    assert residual_k.grad is not None
    assert scale_k.grad is not None
    assert (x_k.grad.dtype, residual_k.grad.dtype) == (x_dtype, residual_dtype)
    assert relative_error(s, s_ref) < TOLERANCE[torch.float32]
    assert relative_error(y, y_ref) < TOLERANCE[y_dtype]
    assert relative_error(x_k.grad, x_r.grad) < TOLERANCE[x_dtype]
    assert relative_error(residual_k.grad, residual_r.grad) < TOLERANCE[residual_dtype]
    assert relative_error(scale_k.grad, scale_r.grad) < TOLERANCE[torch.float32] * 10


@pytest.mark.parametrize("shape", CPU_SHAPES)
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("out_dtype", [None, torch.bfloat16, torch.float32])
def test_rms_norm_matches_reference(shape, x_dtype, out_dtype):
    check_rms_norm(shape, x_dtype, out_dtype)


@pytest.mark.parametrize("shape", CPU_SHAPES)
@pytest.mark.parametrize(
    ("x_dtype", "residual_dtype"),
    [(torch.float32, torch.float32), (torch.bfloat16, torch.float32), (torch.bfloat16,) * 2],
)
@pytest.mark.parametrize("out_dtype", [None, torch.bfloat16])
def test_add_rms_norm_matches_reference(shape, x_dtype, residual_dtype, out_dtype):
    check_add_rms_norm(shape, x_dtype, residual_dtype, out_dtype)


@pytest.mark.parametrize("with_residual", [False, True])
def test_kernels_write_every_output_element(with_residual):
    """Launchers fill NaN-poisoned buffers completely and correctly, sum gradient included."""
    n_rows, width = 101, 37
    x, scale = random_inputs((n_rows, width), torch.bfloat16, DEVICE)
    residual = torch.randn(n_rows, width, device=DEVICE) if with_residual else None
    nan = float("nan")
    y = torch.full((n_rows, width), nan, device=DEVICE, dtype=torch.bfloat16)
    residual_sum = torch.full((n_rows, width), nan, device=DEVICE) if with_residual else None
    rstd = torch.full((n_rows,), nan, device=DEVICE)
    launch_rms_norm_forward(x, residual, scale, 1e-6, y=y, residual_sum=residual_sum, rstd=rstd)

    normed = x if residual_sum is None else residual_sum
    dy = torch.randn(n_rows, width, device=DEVICE).to(torch.bfloat16)
    dsum = torch.randn(n_rows, width, device=DEVICE) if with_residual else None
    n_programs, _ = backward_grid(n_rows, width, DEVICE)
    assert n_programs > 1
    dx = torch.full((n_rows, width), nan, device=DEVICE, dtype=torch.bfloat16)
    dresidual = torch.full((n_rows, width), nan, device=DEVICE) if with_residual else None
    dscale_partial = torch.full((n_programs, width), nan, device=DEVICE)
    launch_rms_norm_backward(
        dy, dsum, normed, scale, rstd, dx=dx, dresidual=dresidual, dscale_partial=dscale_partial
    )

    x_r, scale_r = leaves(x, scale, double=True)
    s_ref = x_r + residual.double() if residual is not None else x_r
    y_ref = rms_norm_naive(s_ref, scale_r)
    grad_sum = (dsum.double(),) if dsum is not None else ()
    torch.autograd.backward([y_ref, s_ref][: 1 + len(grad_sum)], [dy.double(), *grad_sum])
    rstd_ref = torch.rsqrt(s_ref.detach().square().mean(-1) + 1e-6)

    outputs = [y, rstd, dx, dscale_partial, residual_sum, dresidual]
    assert all(bool(t.isfinite().all()) for t in outputs if t is not None)
    assert relative_error(y, y_ref) < TOLERANCE[torch.bfloat16]
    assert relative_error(rstd, rstd_ref) < TOLERANCE[torch.float32]
    assert relative_error(dx, x_r.grad) < TOLERANCE[torch.bfloat16]
    assert relative_error(dscale_partial.sum(0), scale_r.grad) < TOLERANCE[torch.float32] * 10
    if residual_sum is not None and dresidual is not None:
        assert relative_error(residual_sum, s_ref) < TOLERANCE[torch.float32]
        assert relative_error(dresidual, x_r.grad) < TOLERANCE[torch.float32]


@pytest.mark.parametrize("n_rows", [0, 1, 15, 16, 17, 100, 4099])
@pytest.mark.parametrize("width", [37, 2048, 8192])
def test_backward_grid_covers_every_row_once(n_rows, width):
    n_programs, rows_per_program = backward_grid(n_rows, width, DEVICE)
    assert (n_programs - 1) * rows_per_program < n_rows <= n_programs * rows_per_program


def test_gradients_are_bit_reproducible():
    x, scale = random_inputs((100, 37), torch.float32, DEVICE)
    residual = torch.randn_like(x)
    dy = torch.randn_like(x)
    grads = []
    for _ in range(2):
        x_k, residual_k, scale_k = leaves(x, residual, scale)
        s, y = add_rms_norm(x_k, residual_k, scale_k)
        torch.autograd.backward([s, y], [dy, dy])
        grads.append([x_k.grad, residual_k.grad, scale_k.grad])
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))


def saved_shapes(function, *inputs: torch.Tensor) -> list[tuple[int, ...]]:
    """Shapes of the tensors autograd saves while ``function(*inputs)`` runs."""
    shapes: list[tuple[int, ...]] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        shapes.append(tuple(tensor.shape))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        function(*inputs)
    return shapes


def test_backward_saves_only_input_and_rstd():
    x, scale = leaves(*random_inputs((3, 7, 100), torch.bfloat16, DEVICE))
    (residual,) = leaves(torch.randn(x.shape, device=DEVICE))
    expected = [(21, 100), (100,), (21,)]
    assert saved_shapes(rms_norm, x, scale) == expected
    assert saved_shapes(add_rms_norm, x, residual, scale) == expected


def test_empty_input():
    x = torch.empty(0, 5, 37, device=DEVICE, requires_grad=True)
    scale = torch.randn(37, device=DEVICE, requires_grad=True)
    y = rms_norm(x, scale)
    y.sum().backward()
    assert y.shape == x.shape
    assert scale.grad is not None
    assert torch.equal(scale.grad, torch.zeros_like(scale))


def test_cpu_without_interpreter_falls_back_to_reference(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    x, scale = random_inputs((9, 37), torch.float32, torch.device("cpu"))
    residual = torch.randn_like(x)
    assert not triton_enabled(x)
    assert torch.equal(rms_norm(x, scale), rms_norm_naive(x, scale))
    for out, ref in zip(
        add_rms_norm(x, residual, scale), add_rms_norm_naive(x, residual, scale), strict=True
    ):
        assert torch.equal(out, ref)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_enabled(x)


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ((torch.randn(3, 4, dtype=torch.float64), torch.zeros(4)), TypeError, "x must be"),
        ((torch.randn(3, 4), torch.zeros(4, dtype=torch.bfloat16)), TypeError, "scale must"),
        ((torch.randn(3, 4), torch.zeros(5)), ValueError, r"scale must have shape \[D\]"),
        ((torch.randn(3, 8193), torch.zeros(8193)), ValueError, "1 <= D <= 8192"),
        ((torch.randn(()), torch.zeros(1)), ValueError, "x must have shape"),
        ((torch.randn(3, 4), torch.zeros(4), -1.0), ValueError, "eps must"),
    ],
)
def test_rms_norm_rejects_bad_input(arguments, error, match):
    with pytest.raises(error, match=match):
        rms_norm(*arguments)


def test_rejects_bad_out_dtype_and_residual():
    x, scale = torch.randn(3, 4), torch.zeros(4)
    with pytest.raises(TypeError, match="out_dtype must be"):
        rms_norm(x, scale, out_dtype=torch.float16)
    with pytest.raises(ValueError, match="residual must have the shape"):
        add_rms_norm(x, torch.randn(3, 5), scale)
    with pytest.raises(TypeError, match="residual must be"):
        add_rms_norm(x, x.to(torch.int32), scale)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("shape", GPU_SHAPES)
@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_matches_reference_gpu(shape, x_dtype):
    check_rms_norm(shape, x_dtype, torch.bfloat16)
    check_rms_norm(shape, x_dtype, None)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_add_rms_norm_matches_reference_gpu(shape):
    check_add_rms_norm(shape, torch.bfloat16, torch.float32, torch.bfloat16)
    check_add_rms_norm(shape, torch.float32, torch.float32, None)


@pytest.mark.gpu
@requires_cuda
def test_gradients_are_bit_reproducible_gpu():
    x, scale = random_inputs((8192, 2048), torch.bfloat16, DEVICE)
    residual = torch.randn(x.shape, device=DEVICE)
    dy = torch.randn(x.shape, device=DEVICE).to(torch.bfloat16)
    grads = []
    for _ in range(2):
        x_k, residual_k, scale_k = leaves(x, residual, scale)
        s, y = add_rms_norm(x_k, residual_k, scale_k, out_dtype=torch.bfloat16)
        torch.autograd.backward([s, y], [dy.float(), dy])
        grads.append([x_k.grad, residual_k.grad, scale_k.grad])
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))


@pytest.mark.gpu
@requires_cuda
def test_torch_compile_traces_through_ops():
    def two_norms(x, residual, scale_1, scale_2):
        h = rms_norm(residual, scale_1, out_dtype=torch.bfloat16)
        s, y = add_rms_norm(x * h, residual, scale_2, out_dtype=torch.bfloat16)
        return s, y

    torch._dynamo.reset()
    compiled = torch.compile(two_norms, fullgraph=True)
    x, scale_1 = random_inputs((4, 333, 2560), torch.bfloat16, DEVICE)
    residual, scale_2 = random_inputs((4, 333, 2560), torch.float32, DEVICE, seed=1)
    ds = torch.randn(residual.shape, device=DEVICE)
    dy = torch.randn(residual.shape, device=DEVICE).to(torch.bfloat16)
    results = []
    for fn in (two_norms, compiled):
        inputs = leaves(x, residual, scale_1, scale_2)
        outputs = fn(*inputs)
        torch.autograd.backward(list(outputs), [ds, dy])
        results.append([*outputs, *(t.grad for t in inputs)])
    for eager, traced in zip(*results, strict=True):
        assert relative_error(traced, eager) < 1e-3


@pytest.mark.gpu
@requires_cuda
def test_opcheck():
    x, scale = random_inputs((37, 100), torch.bfloat16, DEVICE)
    residual = torch.randn(x.shape, device=DEVICE, requires_grad=True)
    x.requires_grad_()
    scale.requires_grad_()
    torch.library.opcheck(rms_norm_forward, (x, scale, 1e-6, torch.float32))
    torch.library.opcheck(add_rms_norm_forward, (x, residual, scale, 1e-6, torch.bfloat16))
