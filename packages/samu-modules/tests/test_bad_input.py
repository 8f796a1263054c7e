"""Bad input raises ValueError naming the argument and what was expected."""

from __future__ import annotations

import functools

import pytest
import torch
from modules_testing import RNN_WIDTH, WIDTH, tiny_config

from samu_modules import BlockState, ResidualBlock

B, L = 2, 5


@functools.cache
def block() -> ResidualBlock:
    """A tiny SAMU block on the reference backend."""
    return ResidualBlock(tiny_config("samu"))


def good_state() -> BlockState:
    return BlockState.empty(B, RNN_WIDTH)


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (torch.randn(L, WIDTH), r"x must have shape \[B, L, 32\]"),
        (torch.randn(B, L, WIDTH + 1), r"x must have shape \[B, L, 32\]"),
        (torch.randn(B, 0, WIDTH), r"x must have shape \[B, L, 32\] with B, L >= 1"),
        (torch.ones(B, L, WIDTH, dtype=torch.int64), "x must have a floating dtype"),
        ([[0.0] * WIDTH], "x must be a torch.Tensor"),
    ],
)
def test_bad_x(x: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        block()(x)


@pytest.mark.parametrize(
    ("segment_pos", "message"),
    [
        (torch.zeros(B, L + 1, dtype=torch.long), r"segment_pos must have shape \[2, 5\]"),
        (torch.zeros(B * L, dtype=torch.long), r"segment_pos must have shape \[2, 5\]"),
        (torch.zeros(B, L), "segment_pos must have an integer dtype"),
        (torch.zeros(B, L, dtype=torch.bool), "segment_pos must have an integer dtype"),
        (torch.zeros(B, L, dtype=torch.long, device="meta"), "segment_pos must be on x's device"),
    ],
)
def test_bad_segment_pos(segment_pos: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        block()(torch.randn(B, L, WIDTH), segment_pos)


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ((torch.zeros(B, RNN_WIDTH), torch.zeros(B, 3, RNN_WIDTH)), "state must be a BlockState"),
        (good_state()._replace(h=torch.zeros(B, RNN_WIDTH + 1)), "state.h must be torch.float32"),
        (good_state()._replace(h=torch.zeros(B, RNN_WIDTH).bfloat16()), "state.h must be"),
        (good_state()._replace(conv=torch.zeros(B, 4, RNN_WIDTH)), "state.conv must be floating"),
        (good_state()._replace(conv=torch.zeros(B, 3, RNN_WIDTH, dtype=torch.int32)), "state.conv"),
        (
            good_state()._replace(conv=torch.zeros(B, 3, RNN_WIDTH, device="meta")),
            "state.conv must be on",
        ),
        (good_state()._replace(h=None), "state.h must be a torch.Tensor"),  # type: ignore[arg-type]
    ],
)
def test_bad_state(state: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        block()(torch.randn(B, L, WIDTH), state=state)


def test_unknown_backend_and_controller() -> None:
    with pytest.raises(ValueError, match="backend"):
        tiny_config("rglru", backend="chunk16_fused")
    with pytest.raises(ValueError, match="controller"):
        tiny_config("samu", controller="fp16_coords")
