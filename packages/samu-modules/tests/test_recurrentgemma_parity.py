"""Parity with the public recurrentgemma package (its torch ResidualBlock, v1.0.1).

recurrentgemma needs Python >= 3.11: the module skips itself elsewhere.
"""

from __future__ import annotations

import pytest
import torch

import samu_kernels

pytest.importorskip("recurrentgemma.torch")

from modules_testing import (
    LAYER_VARIANTS,
    perturb_parameters_,
    relative_error,
    segment_positions,
)
from recurrentgemma import common
from recurrentgemma.torch import modules as rg_modules

from samu_modules import (
    BlockConfig,
    Layers,
    ResidualBlock,
    convert_recurrentgemma_state_dict,
    from_recurrentgemma,
    load_recurrentgemma_state_dict,
)

D, R, HEADS, DEPTH = 32, 48, 16, 3
TOLERANCE = 2e-5


def recurrentgemma_block(width: int = D, rnn_width: int = R, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    block: torch.nn.Module = rg_modules.ResidualBlock(
        width=width,
        mlp_expanded_width=3 * width,
        num_heads=HEADS,
        attention_window_size=16,
        temporal_block_type=common.TemporalBlockType.RECURRENT,
        lru_width=rnn_width,
        final_w_init_variance_scale=2 / DEPTH,
    )
    return block


def random_pair(layers: Layers = "torch") -> tuple[torch.nn.Module, ResidualBlock]:
    """A recurrentgemma block with every parameter randomised, and ours loaded from it."""
    theirs = recurrentgemma_block()
    perturb_parameters_(theirs, torch.Generator().manual_seed(1), scale=0.2)
    ours = from_recurrentgemma(theirs, backend="reference", layers=layers)
    return theirs, ours


def test_loader_reads_the_config() -> None:
    _, ours = random_pair()
    config = ours.config
    assert (config.width, config.rnn_width, config.depth) == (D, R, DEPTH)
    assert (config.num_heads, config.conv1d_width, config.mlp_expansion) == (HEADS, 4, 3)
    assert (config.architecture, config.backend) == ("rglru", "reference")


@pytest.mark.parametrize("layers", LAYER_VARIANTS)
def test_forward_and_gradients_match_recurrentgemma(layers: Layers) -> None:
    theirs, ours = random_pair(layers)
    torch.manual_seed(2)
    length = 21
    segment_pos = segment_positions(length, [[5, 6, 17], [1, 2, 3], [20], []])
    x = torch.randn(4, length, D)
    x_theirs = x.clone().requires_grad_()
    x_ours = x.clone().requires_grad_()

    expected, _ = theirs(x_theirs, segment_pos, return_cache=False)
    output = ours(x_ours, segment_pos)
    assert relative_error(output, expected) < TOLERANCE

    grad = torch.randn_like(expected)
    expected.backward(grad)
    output.backward(grad)
    assert relative_error(x_ours.grad, x_theirs.grad) < TOLERANCE  # type: ignore[arg-type]
    expected_grads = convert_recurrentgemma_state_dict(
        {name: p.grad for name, p in theirs.named_parameters()}  # type: ignore[misc]
    )
    for name, parameter in ours.named_parameters():
        assert relative_error(parameter.grad, expected_grads[name]) < TOLERANCE, name  # type: ignore[arg-type]


def test_decoding_matches_recurrentgemma() -> None:
    """A prompt with packed documents, then token-by-token decoding from the cache/state."""
    theirs, ours = random_pair()
    torch.manual_seed(3)
    prompt_length, steps = 9, 4
    x = torch.randn(2, prompt_length + steps, D)
    positions = segment_positions(prompt_length + steps, [[2], [4]])
    with torch.no_grad():
        expected, cache = theirs(x[:, :prompt_length], positions[:, :prompt_length])
        output, state = ours(x[:, :prompt_length], positions[:, :prompt_length], return_state=True)
        assert relative_error(output, expected) < TOLERANCE
        for t in range(prompt_length, prompt_length + steps):
            expected, cache = theirs(x[:, t : t + 1], positions[:, t : t + 1], cache)
            output, state = ours(x[:, t : t + 1], positions[:, t : t + 1], state, return_state=True)
            assert relative_error(output, expected) < TOLERANCE
            assert relative_error(state.h, cache.rg_lru_state) < TOLERANCE
            assert relative_error(state.conv, cache.conv1d_state) < TOLERANCE


def test_initialisation_follows_recurrentgemma() -> None:
    """Same zero parameters, same weight standard deviations (within sampling error)."""
    width = 256
    theirs = convert_recurrentgemma_state_dict(
        recurrentgemma_block(width=width, rnn_width=width).state_dict()
    )
    config = BlockConfig(width, width, DEPTH, "rglru", backend="reference")
    ours = ResidualBlock(config).state_dict()
    assert ours.keys() == theirs.keys()
    for name, expected in theirs.items():
        parameter = ours[name]
        assert parameter.shape == expected.shape, name
        if name.endswith("a_param"):
            radius = torch.exp(-torch.nn.functional.softplus(parameter))
            assert radius.min().item() >= 0.9
            assert radius.max().item() <= 0.999 + 1e-6
        elif torch.count_nonzero(expected) == 0:
            assert torch.count_nonzero(parameter) == 0, name
        else:
            assert parameter.std().item() == pytest.approx(expected.std().item(), rel=0.1), name


def test_loader_refuses_mismatches() -> None:
    theirs = recurrentgemma_block()
    samu = ResidualBlock(BlockConfig(D, R, DEPTH, "samu", backend="reference"))
    with pytest.raises(ValueError, match="architecture 'rglru'"):
        load_recurrentgemma_state_dict(samu, theirs.state_dict())
    rglru = ResidualBlock(BlockConfig(D, R, DEPTH, "rglru", backend="reference"))
    state_dict = theirs.state_dict()
    del state_dict["temporal_pre_norm.scale"]
    with pytest.raises(ValueError, match="missing"):
        load_recurrentgemma_state_dict(rglru, state_dict)
    wider = recurrentgemma_block(rnn_width=2 * R).state_dict()
    with pytest.raises(ValueError, match="must have shape"):
        load_recurrentgemma_state_dict(rglru, wider)
    with pytest.raises(ValueError, match="RECURRENT"):
        from_recurrentgemma(torch.nn.Linear(2, 2))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_default_triton_backend_matches_recurrentgemma_on_gpu() -> None:
    theirs, _ = random_pair()
    theirs = theirs.cuda()
    ours = from_recurrentgemma(theirs)
    assert ours.config.backend == samu_kernels.DEFAULT_BACKENDS["rglru"]
    torch.manual_seed(4)
    length = 300
    segment_pos = segment_positions(length, [[5, 6, 170], [299]]).cuda()
    x = torch.randn(2, length, D, device="cuda")
    x_theirs = x.clone().requires_grad_()
    x_ours = x.clone().requires_grad_()
    expected, _ = theirs(x_theirs, segment_pos, return_cache=False)
    output = ours(x_ours, segment_pos)
    assert relative_error(output, expected) < 1e-4
    grad = torch.randn_like(expected)
    expected.backward(grad)
    output.backward(grad)
    assert relative_error(x_ours.grad, x_theirs.grad) < 1e-4  # type: ignore[arg-type]
