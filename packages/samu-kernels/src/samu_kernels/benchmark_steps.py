"""The timed steps of the kernel benchmark: forward + backward of one scan on random inputs.

Each factory returns ``(step, leaves)``: ``step()`` runs forward and backward once in
bfloat16 on fresh random inputs of shape [B, L, R] (our scans' ``channels_first`` steps:
[B, R, L]); ``leaves`` are the tensors whose gradients it accumulates (the timers reset them
between repetitions).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from samu_kernels.rglru import rglru_scan
from samu_kernels.samu import samu_scan

__all__ = ["Step", "peer_steps", "scan_step"]

Step = Callable[[], object]
"""One forward + backward, run for its effect on the GPU."""


def _sequence_shape(shape: tuple[int, int, int], channels_first: bool) -> tuple[int, int, int]:
    batch, length, width = shape
    return (batch, width, length) if channels_first else shape


def _rglru_step(
    shape: tuple[int, int, int], backend: str, device: torch.device, channels_first: bool
) -> tuple[Step, list[torch.Tensor]]:
    u, gate_x, gate_a, y, grad = (
        torch.randn(_sequence_shape(shape, channels_first), device=device, dtype=torch.bfloat16)
        for _ in range(5)
    )
    a_param = torch.full((shape[2],), -4.0, device=device)
    leaves = [t.requires_grad_(True) for t in (u, gate_x, gate_a, y, a_param)]

    def step() -> None:
        output = rglru_scan(
            u, gate_x, gate_a, a_param, y, backend=backend, channels_first=channels_first
        ).output
        torch.autograd.backward(output, grad)

    return step, leaves


def _samu_step(
    shape: tuple[int, int, int], backend: str, device: torch.device, channels_first: bool
) -> tuple[Step, list[torch.Tensor]]:
    u, y, grad = (
        torch.randn(_sequence_shape(shape, channels_first), device=device, dtype=torch.bfloat16)
        for _ in range(3)
    )
    channels = [torch.randn(shape[2], device=device) for _ in range(3)]
    scalars = [torch.tensor(value, device=device) for value in (0.0, 0.0, math.log(8), 0.5)]
    leaves = [t.requires_grad_(True) for t in (u, y, *channels, *scalars)]
    a_param, w_a, w_x = channels
    b_a, b_x, log_c, skip = scalars

    def step() -> None:
        output = samu_scan(
            u, y, a_param, w_a, b_a, w_x, b_x, log_c, skip,
            backend=backend, channels_first=channels_first,
        ).output  # fmt: skip
        torch.autograd.backward(output, grad)

    return step, leaves


def peer_steps(
    shape: tuple[int, int, int], device: torch.device
) -> dict[str, tuple[Step, list[torch.Tensor]]]:
    """The public scans that are importable, on h_t = a_t h_{t-1} + x_t in bfloat16."""
    steps: dict[str, tuple[Step, list[torch.Tensor]]] = {}
    x, grad = (torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(2))
    log_a = (-torch.rand(shape, device=device) * 0.1).to(torch.bfloat16)
    try:
        from fla.ops.hgrn import chunk_hgrn, fused_recurrent_hgrn  # noqa: PLC0415
    except ImportError as error:
        print(f"skipping fla-core (fla.ops.hgrn): {error}")
    else:
        for name, fn in (
            ("fla.chunk_hgrn", chunk_hgrn),
            ("fla.fused_recurrent_hgrn", fused_recurrent_hgrn),
        ):
            xs, gs = x.clone().requires_grad_(True), log_a.clone().requires_grad_(True)

            def fla_step(
                fn: Callable[..., tuple[torch.Tensor, object]] = fn,
                xs: torch.Tensor = xs,
                gs: torch.Tensor = gs,
            ) -> None:
                torch.autograd.backward(fn(xs, gs)[0], grad)

            steps[name] = (fla_step, [xs, gs])
    try:
        # The Triton scan of accelerated-scan; its `warp` variant is a CUDA extension
        # built at import time and is not timed here.
        from accelerated_scan.scalar import scan  # noqa: PLC0415
    except ImportError as error:
        print(f"skipping accelerated_scan (accelerated_scan.scalar.scan): {error}")
    else:
        decays = log_a.float().exp().to(torch.bfloat16)
        # accelerated_scan's layout is [B, C, T].
        gates = decays.transpose(1, 2).contiguous().requires_grad_(True)
        tokens = x.transpose(1, 2).contiguous().requires_grad_(True)
        grad_bct = grad.transpose(1, 2).contiguous()

        def accelerated_step() -> None:
            torch.autograd.backward(scan(gates, tokens), grad_bct)

        steps["accelerated_scan.scalar"] = (accelerated_step, [gates, tokens])
        # The same scan called from our layout: what a [B, L, R] model pays for it (the
        # transposes to [B, C, T] and back, forward and backward, are in the timed step).
        decays_blr, x_blr = decays.requires_grad_(True), x.clone().requires_grad_(True)

        def accelerated_from_rows_step() -> None:
            states = scan(
                decays_blr.transpose(1, 2).contiguous(), x_blr.transpose(1, 2).contiguous()
            )
            torch.autograd.backward(states.transpose(1, 2).contiguous(), grad)

        steps["accelerated_scan.scalar+transposes"] = (
            accelerated_from_rows_step,
            [decays_blr, x_blr],
        )
    return steps


def scan_step(
    architecture: str,
    shape: tuple[int, int, int],
    backend: str,
    device: torch.device,
    *,
    channels_first: bool = False,
) -> tuple[Step, list[torch.Tensor]]:
    """Forward + backward of our ``architecture`` ('rglru' or 'samu') scan with ``backend``
    on bfloat16 inputs of ``shape`` [B, L, R] (given as [B, R, L] with ``channels_first``)."""
    if architecture not in ("rglru", "samu"):
        raise ValueError(f"architecture must be 'rglru' or 'samu', got {architecture!r}")
    make = _rglru_step if architecture == "rglru" else _samu_step
    return make(shape, backend, device, channels_first)
