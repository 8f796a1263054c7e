"""The peer linear-scan adapters against samu-kernels' float64 reference.

CPU tests drive the adapters with fake library functions (fla and accelerated-scan are
Triton-only and autotune on a GPU); the `gpu` tests run the real libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import pytest
import torch

from samu_bench.peers import (
    accelerated_linear_scan,
    chunk_hgrn_linear_scan,
    fused_recurrent_hgrn_linear_scan,
)
from samu_bench.peers.registry import PEERS
from samu_kernels.common.reference import linear_scan_reference
from samu_kernels.peers import LinearScanFn

Inputs: TypeAlias = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]
AdapterMaker: TypeAlias = Callable[[], tuple[LinearScanFn, object]]


def relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    """||output - reference|| / ||reference||, in float64."""
    difference = output.detach().double() - reference.detach().double()
    return float(difference.norm() / reference.detach().double().norm())


def sequential_scan(decay: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None) -> torch.Tensor:
    """h_t = decay_t h_{t-1} + x_t over dim 1 of [B, L, R], in float64 with autograd."""
    state = torch.zeros_like(x[:, 0], dtype=torch.float64) if h0 is None else h0.double()
    states = []
    for step in range(x.shape[1]):
        state = decay[:, step].double() * state + x[:, step].double()
        states.append(state)
    return torch.stack(states, dim=1)


class FakeHgrn:
    """Stands in for fla's `chunk_hgrn` / `fused_recurrent_hgrn` and records its calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(
        self,
        x: torch.Tensor,
        g: torch.Tensor,
        initial_state: torch.Tensor | None = None,
        output_final_state: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        self.calls.append(
            {
                "x": x.dtype,
                "g": g.dtype,
                "h0": initial_state is not None,
                "final": output_final_state,
            }
        )
        states = sequential_scan(torch.exp(g), x, initial_state)
        return states.to(x.dtype), None


class FakeGateScan:
    """Stands in for accelerated-scan's `scan(gates, tokens)` on contiguous [B, C, T]."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, gates: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        if not (gates.is_contiguous() and tokens.is_contiguous()):
            raise AssertionError("accelerated-scan needs contiguous inputs")
        if gates.dtype != torch.float32 or tokens.dtype != torch.float32:
            raise AssertionError(f"expected float32, got {gates.dtype}, {tokens.dtype}")
        self.shapes.append(tuple(gates.shape))
        states = sequential_scan(gates.transpose(1, 2), tokens.transpose(1, 2), None)
        return states.transpose(1, 2).float().contiguous()


def scan_inputs(
    *,
    batch: int = 2,
    length: int = 13,
    width: int = 5,
    with_h0: bool,
    resets: bool,
    x_dtype: torch.dtype = torch.float32,
    device: str = "cpu",
) -> Inputs:
    """Fresh random leaves requiring grad; log_a is -inf at document starts if `resets`."""
    log_a = -torch.rand(batch, length, width) * 2.0 - 1e-3
    if resets:
        log_a[0, 0] = float("-inf")
        log_a[1, 6] = float("-inf")
    x = torch.randn(batch, length, width).to(x_dtype)
    h0 = torch.randn(batch, width) if with_h0 else None
    return (
        log_a.to(device).requires_grad_(True),
        x.to(device).requires_grad_(True),
        None if h0 is None else h0.to(device).requires_grad_(True),
    )


def leaf(tensor: torch.Tensor | None, dtype: torch.dtype | None = None) -> torch.Tensor | None:
    """A detached copy (cast to `dtype` if given) that requires grad; None stays None."""
    if tensor is None:
        return None
    copy = tensor.detach().to(dtype) if dtype is not None else tensor.detach().clone()
    return copy.requires_grad_(True)


def check_against_reference(scan: LinearScanFn, inputs: Inputs, tolerance: float) -> None:
    """Outputs, final state and every input gradient against the float64 reference."""
    log_a, x, h0 = inputs
    ref_log_a, ref_x, ref_h0 = (leaf(t, torch.float64) for t in (log_a, x, h0))
    assert ref_log_a is not None
    assert ref_x is not None
    ref_states, ref_last = linear_scan_reference(ref_log_a, ref_x, ref_h0)
    states, last = scan(log_a, x, h0)
    assert states.shape == x.shape
    assert last.dtype == torch.float32
    assert last.shape == (x.shape[0], x.shape[2])
    assert relative_error(states, ref_states) < tolerance
    assert relative_error(last, ref_last) < tolerance

    weights = torch.randn(states.shape, dtype=torch.float64, device=states.device)
    last_weights = torch.randn(last.shape, dtype=torch.float64, device=last.device)
    torch.autograd.backward((ref_states * weights).sum() + (ref_last * last_weights).sum())
    torch.autograd.backward(
        (states.double() * weights).sum() + (last.double() * last_weights).sum()
    )
    for tensor, reference in ((log_a, ref_log_a), (x, ref_x), (h0, ref_h0)):
        if tensor is None or reference is None:
            continue
        assert tensor.grad is not None
        assert reference.grad is not None
        assert torch.isfinite(tensor.grad).all()
        assert relative_error(tensor.grad, reference.grad) < tolerance


def fake_chunk() -> tuple[LinearScanFn, FakeHgrn]:
    fake = FakeHgrn()
    return chunk_hgrn_linear_scan(fake), fake


def fake_fused() -> tuple[LinearScanFn, FakeHgrn]:
    fake = FakeHgrn()
    return fused_recurrent_hgrn_linear_scan(fake), fake


def fake_accelerated() -> tuple[LinearScanFn, FakeGateScan]:
    fake = FakeGateScan()
    return accelerated_linear_scan(fake), fake


@pytest.mark.parametrize("make", [fake_chunk, fake_fused, fake_accelerated])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("resets", [False, True])
def test_adapter_matches_reference(make: AdapterMaker, with_h0: bool, resets: bool) -> None:
    scan, _ = make()
    check_against_reference(scan, scan_inputs(with_h0=with_h0, resets=resets), 1e-6)


def test_chunk_hgrn_folds_the_initial_state() -> None:
    """chunk_hgrn (fla-core 0.6.0) gives no initial-state gradient: h0 is folded into x."""
    scan, fake = fake_chunk()
    scan(*scan_inputs(with_h0=True, resets=False))
    scan(*scan_inputs(with_h0=False, resets=False))
    assert [call["h0"] for call in fake.calls] == [False, False]
    assert fake.calls[0]["x"] == torch.float32


def test_fused_recurrent_hgrn_takes_the_initial_state_natively() -> None:
    scan, fake = fake_fused()
    scan(*scan_inputs(with_h0=True, resets=False))
    assert fake.calls == [{"x": torch.float32, "g": torch.float32, "h0": True, "final": False}]


def test_fla_adapters_keep_the_compute_dtype() -> None:
    """x reaches fla in the compute dtype (bf16 under autocast), log_a in float32."""
    for make in (fake_chunk, fake_fused):
        scan, fake = make()
        log_a, x, _ = scan_inputs(with_h0=False, resets=True, x_dtype=torch.bfloat16)
        states, last = scan(log_a, x, None)
        assert fake.calls[-1]["x"] == torch.bfloat16
        assert fake.calls[-1]["g"] == torch.float32
        assert states.dtype == torch.bfloat16
        assert last.dtype == torch.float32


def test_accelerated_scan_gets_contiguous_channel_major_float32() -> None:
    scan, fake = fake_accelerated()
    log_a, x, _ = scan_inputs(
        batch=3, length=11, width=7, with_h0=False, resets=False, x_dtype=torch.bfloat16
    )
    states, _ = scan(log_a, x, None)
    assert fake.shapes == [(3, 7, 11)]
    assert states.shape == (3, 11, 7)
    assert states.dtype == torch.float32


@pytest.mark.parametrize("make", [fake_chunk, fake_fused, fake_accelerated])
def test_adapters_refuse_bad_arguments(make: AdapterMaker) -> None:
    scan, _ = make()
    log_a, x, h0 = scan_inputs(with_h0=True, resets=False)
    assert h0 is not None
    with pytest.raises(TypeError, match="log_a must be float32"):
        scan(log_a.double(), x, None)
    with pytest.raises(ValueError, match=r"log_a must be \[B, L, R\]"):
        scan(log_a[0], x[0], None)
    with pytest.raises(ValueError, match="x must have log_a's shape"):
        scan(log_a, x[:, :-1], None)
    with pytest.raises(TypeError, match="x must be a floating tensor"):
        scan(log_a, x.long(), None)
    with pytest.raises(TypeError, match="h0 must be float32"):
        scan(log_a, x, h0.double())
    with pytest.raises(ValueError, match=r"h0 must be \[B, R\]"):
        scan(log_a, x, h0[:1])


def _real_scan(backend: str) -> LinearScanFn:
    distribution = {"peer:accelerated_scan": "accelerated_scan"}.get(backend, "fla")
    pytest.importorskip(distribution, reason=f"{backend} needs samu-bench[peers]")
    (peer,) = (peer for peer in PEERS if peer.backend == backend)
    scan = peer.load()
    assert scan is not None
    return scan


SCAN_BACKENDS = ["peer:fla_chunk_hgrn", "peer:fla_fused_recurrent_hgrn", "peer:accelerated_scan"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", SCAN_BACKENDS)
@pytest.mark.parametrize("with_h0", [False, True])
def test_real_library_float32_matches_reference(backend: str, with_h0: bool) -> None:
    """L = 300 crosses fla's 128-step chunks unevenly; R = 100 is no multiple of a block."""
    scan = _real_scan(backend)
    inputs = scan_inputs(
        batch=3, length=300, width=100, with_h0=with_h0, resets=True, device="cuda"
    )
    check_against_reference(scan, inputs, 1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", SCAN_BACKENDS)
def test_real_library_bfloat16_input_matches_reference(backend: str) -> None:
    """With bf16 x (as under autocast) only the output's rounding is left."""
    scan = _real_scan(backend)
    inputs = scan_inputs(
        batch=3,
        length=300,
        width=100,
        with_h0=False,
        resets=True,
        x_dtype=torch.bfloat16,
        device="cuda",
    )
    check_against_reference(scan, inputs, 2e-2)
