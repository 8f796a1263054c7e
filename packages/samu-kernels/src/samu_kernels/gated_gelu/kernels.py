"""Triton kernels of the tanh-approximate GELU and the GELU-gated product, forward and backward.

Elementwise over flat contiguous buffers, one BLOCK of elements per program, float32 math.
``gelu_tanh(x) = 0.5 x (1 + tanh(k (x + c x^3)))`` is evaluated as ``x * sigmoid(2 k (x + c x^3))``
(the same function: ``0.5 (1 + tanh(z)) = sigmoid(2 z)``), which needs one exponential;
the derivative is ``s + 2 x s (1 - s) k (1 + 3 c x^2)`` with ``s`` that sigmoid.
"""

import triton
import triton.language as tl

SQRT_2_OVER_PI: tl.constexpr = tl.constexpr(0.7978845608028654)
CUBIC_COEFFICIENT: tl.constexpr = tl.constexpr(0.044715)


@triton.jit
def _sigmoid_pair(z):
    """(sigmoid(z), 1 - sigmoid(z)), each from exp(-|z|): no overflow, no cancellation."""
    e = tl.exp(-tl.abs(z))
    large = 1.0 / (1.0 + e)
    small = e * large
    positive = z >= 0
    return tl.where(positive, large, small), tl.where(positive, small, large)


@triton.jit
def _gelu_tanh(x):
    gate, _ = _sigmoid_pair((x + CUBIC_COEFFICIENT * x * x * x) * (2.0 * SQRT_2_OVER_PI))
    return x * gate


@triton.jit
def _gelu_tanh_with_derivative(x):
    gate, gate_complement = _sigmoid_pair(
        (x + CUBIC_COEFFICIENT * x * x * x) * (2.0 * SQRT_2_OVER_PI)
    )
    inner_derivative = (1.0 + 3.0 * CUBIC_COEFFICIENT * x * x) * SQRT_2_OVER_PI
    derivative = gate + 2.0 * x * gate * gate_complement * inner_derivative
    return x * gate, derivative


@triton.jit
def gelu_tanh_forward_kernel(
    x_ptr,
    value_ptr,
    out_ptr,
    n_elements,
    HAS_VALUE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """out = gelu_tanh(x) (* value when HAS_VALUE)."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    out = _gelu_tanh(x)
    if HAS_VALUE:
        out *= tl.load(value_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def gelu_tanh_backward_kernel(
    dout_ptr,
    x_ptr,
    value_ptr,
    dx_ptr,
    dvalue_ptr,
    n_elements,
    HAS_VALUE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """dx = dout (* value) * gelu_tanh'(x); with HAS_VALUE also dvalue = dout * gelu_tanh(x).

    gelu_tanh(x) and its derivative are recomputed from the saved x.
    """
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    dout = tl.load(dout_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    gelu, derivative = _gelu_tanh_with_derivative(x)
    if HAS_VALUE:
        value = tl.load(value_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(dvalue_ptr + offsets, (dout * gelu).to(dvalue_ptr.dtype.element_ty), mask=mask)
        dout *= value
    tl.store(dx_ptr + offsets, (dout * derivative).to(dx_ptr.dtype.element_ty), mask=mask)
