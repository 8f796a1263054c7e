"""Streaming and decoding: pieces with the state passed along equal one pass."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from modules_testing import (
    RNN_WIDTH,
    WIDTH,
    random_block,
    relative_error,
    segment_positions,
    tiny_config,
)

from samu_modules import BlockState, ResidualBlock

BATCH = 2
MAX_LENGTH = 20
TOLERANCE = 1e-6


@functools.cache
def block(architecture: str) -> ResidualBlock:
    """One randomised tiny block per architecture, shared by the tests of this module."""
    return random_block(tiny_config(architecture))  # type: ignore[arg-type]


def run_in_pieces(
    model: ResidualBlock,
    x: torch.Tensor,
    segment_pos: torch.Tensor | None,
    splits: list[int],
) -> tuple[torch.Tensor, BlockState]:
    """Run `x` in pieces cut at `splits`, passing the state along."""
    bounds = [0, *splits, x.shape[1]]
    outputs = []
    state = None
    for begin, end in itertools.pairwise(bounds):
        positions = None if segment_pos is None else segment_pos[:, begin:end]
        output, state = model(x[:, begin:end], positions, state, return_state=True)
        outputs.append(output)
    assert state is not None
    return torch.cat(outputs, dim=1), state


@st.composite
def streams(draw: st.DrawFn) -> tuple[int, list[int], list[list[int]] | None, int]:
    length = draw(st.integers(1, MAX_LENGTH))
    inner = st.integers(1, max(1, length - 1))
    splits = sorted(set(draw(st.lists(inner, max_size=3)))) if length > 1 else []
    resets = draw(st.none() | st.lists(st.lists(inner, max_size=4), min_size=BATCH, max_size=BATCH))
    return length, splits, resets, draw(st.integers(0, 2**16))


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
@settings(max_examples=40, deadline=None)
@given(stream=streams())
def test_pieces_equal_one_pass(
    architecture: str, stream: tuple[int, list[int], list[list[int]] | None, int]
) -> None:
    length, splits, resets, seed = stream
    model = block(architecture)
    x = torch.randn(BATCH, length, WIDTH, generator=torch.Generator().manual_seed(seed))
    segment_pos = None if resets is None else segment_positions(length, resets)
    with torch.no_grad():
        whole, whole_state = model(x, segment_pos, return_state=True)
        pieces, state = run_in_pieces(model, x, segment_pos, splits)
    assert relative_error(pieces, whole) < TOLERANCE
    assert relative_error(state.h, whole_state.h) < TOLERANCE
    torch.testing.assert_close(state.conv, whole_state.conv)


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
@settings(max_examples=15, deadline=None)
@given(stream=streams())
def test_decoding_token_by_token_equals_one_pass(
    architecture: str, stream: tuple[int, list[int], list[list[int]] | None, int]
) -> None:
    length, _, resets, seed = stream
    model = block(architecture)
    x = torch.randn(BATCH, length, WIDTH, generator=torch.Generator().manual_seed(seed))
    segment_pos = None if resets is None else segment_positions(length, resets)
    with torch.no_grad():
        whole = model(x, segment_pos)
        decoded, _ = run_in_pieces(model, x, segment_pos, list(range(1, length)))
    assert relative_error(decoded, whole) < TOLERANCE


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_gradients_flow_through_the_state(architecture: str) -> None:
    model = block(architecture)
    torch.manual_seed(0)
    x = torch.randn(BATCH, 11, WIDTH)
    segment_pos = segment_positions(11, [[3], [8]])
    x_whole = x.clone().requires_grad_()
    x_pieces = x.clone().requires_grad_()
    whole = model(x_whole, segment_pos)
    pieces, _ = run_in_pieces(model, x_pieces, segment_pos, [4, 5])
    grad = torch.randn_like(whole)
    whole_grads = torch.autograd.grad(whole, [x_whole, *model.parameters()], grad)
    pieces_grads = torch.autograd.grad(pieces, [x_pieces, *model.parameters()], grad)
    for expected, got in zip(whole_grads, pieces_grads, strict=True):
        assert relative_error(got, expected) < 1e-5


@pytest.mark.parametrize("architecture", ["rglru", "samu"])
def test_empty_state_is_a_fresh_start(architecture: str) -> None:
    """A zero state with positions starting at 0 equals no state; the output state has the
    documented shapes and dtypes."""
    model = block(architecture)
    torch.manual_seed(1)
    x = torch.randn(BATCH, 7, WIDTH)
    segment_pos = segment_positions(7, [[], [2]])
    empty = BlockState.empty(BATCH, RNN_WIDTH)
    with torch.no_grad():
        fresh, state = model(x, segment_pos, return_state=True)
        from_empty = model(x, segment_pos, empty)
        without_positions = model(x)
    torch.testing.assert_close(from_empty, fresh)
    assert state.h.shape == (BATCH, RNN_WIDTH)
    assert state.h.dtype == torch.float32
    assert state.conv.shape == (BATCH, 3, RNN_WIDTH)
    # Without positions a fresh row is one document: the same as positions 0..L-1.
    with torch.no_grad():
        torch.testing.assert_close(without_positions, model(x, segment_positions(7, [[], []])))
