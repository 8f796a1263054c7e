"""The block on the default Triton backends and either layers, against the reference backend
with PyTorch layers (under TRITON_INTERPRET=1 without a GPU)."""

from __future__ import annotations

import os

import pytest
import torch
from modules_testing import (
    LAYER_VARIANTS,
    WIDTH,
    random_block,
    relative_error,
    segment_positions,
    tiny_config,
    with_backend,
)

import samu_kernels
from samu_modules import Layers

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="Triton backends need CUDA or TRITON_INTERPRET=1",
)
TOLERANCE = 1e-4


@pytest.mark.parametrize("layers", LAYER_VARIANTS)
@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_default_backends_match_reference(architecture: str, layers: Layers) -> None:
    reference = random_block(tiny_config(architecture))  # type: ignore[arg-type]
    triton = with_backend(reference, samu_kernels.DEFAULT_BACKENDS[architecture], layers=layers)
    torch.manual_seed(0)
    length = 37  # not a multiple of the chunk
    segment_pos = segment_positions(length, [[5, 20], [36]])
    x = torch.randn(2, length, WIDTH)
    x_reference = x.clone().requires_grad_()
    x_triton = x.clone().requires_grad_()

    expected, expected_state = reference(x_reference, segment_pos, return_state=True)
    output, state = triton(x_triton, segment_pos, return_state=True)
    assert relative_error(output, expected) < TOLERANCE
    assert relative_error(state.h, expected_state.h) < TOLERANCE

    grad = torch.randn_like(expected)
    expected_grads = torch.autograd.grad(expected, [x_reference, *reference.parameters()], grad)
    grads = torch.autograd.grad(output, [x_triton, *triton.parameters()], grad)
    names = ["x", *(name for name, _ in triton.named_parameters())]
    for name, got, want in zip(names, grads, expected_grads, strict=True):
        assert relative_error(got, want) < TOLERANCE, name

    with torch.no_grad():
        first, piece_state = triton(x[:, :17], segment_pos[:, :17], return_state=True)
        second = triton(x[:, 17:], segment_pos[:, 17:], piece_state)
    assert relative_error(torch.cat([first, second], dim=1), expected) < TOLERANCE
