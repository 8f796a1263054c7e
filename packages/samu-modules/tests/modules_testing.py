"""Helpers shared by the samu-modules tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from samu_modules import DEFAULT, Architecture, BlockConfig, Layers, ResidualBlock

WIDTH = 32
RNN_WIDTH = 48  # 16 heads of 3 channels
DEPTH = 3


LAYER_VARIANTS = ("fused", "torch")
"""The two ways of computing the norms and GELUs; "fused" runs the Triton interpreter here."""


def tiny_config(
    architecture: Architecture,
    backend: str = "reference",
    layers: Layers = "torch",
    **overrides: object,
) -> BlockConfig:
    """A small block config (D=32, R=48) on the reference backend.

    The layers default to the PyTorch composition (fast on the CPU); tests of the fused
    layers ask for `layers="fused"`.
    """
    controller = {"controller": "reference"} if architecture == "samu" else {}
    fields: dict[str, object] = {**controller, "layers": layers, **overrides}
    return BlockConfig(
        width=WIDTH,
        rnn_width=RNN_WIDTH,
        depth=DEPTH,
        architecture=architecture,
        backend=backend,
        **fields,  # type: ignore[arg-type]
    )


@torch.no_grad()
def perturb_parameters_(
    module: torch.nn.Module, generator: torch.Generator, scale: float = 0.1
) -> None:
    """Add N(0, scale^2) noise to every parameter, so zero-initialised ones are not zero."""
    for parameter in module.parameters():
        noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
        parameter.add_(noise.to(parameter) * scale)


def random_block(
    config: BlockConfig, seed: int = 0, dtype: torch.dtype = torch.float32
) -> ResidualBlock:
    """A CPU block with every parameter randomised (no zero biases or norm scales)."""
    torch.manual_seed(seed)
    block = ResidualBlock(config, dtype=dtype)
    perturb_parameters_(block, torch.Generator().manual_seed(seed + 1))
    return block


def segment_positions(length: int, starts_per_row: Sequence[Sequence[int]]) -> torch.Tensor:
    """[B, L] int64 positions for rows whose documents start at 0 and at `starts_per_row`."""
    rows = []
    for starts in starts_per_row:
        position = torch.arange(length)
        for start in sorted(set(starts)):
            if 0 < start < length:
                position[start:] = torch.arange(length - start)
        rows.append(position)
    return torch.stack(rows)


def relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    """||output - reference|| / ||reference|| computed in float64."""
    reference64 = reference.detach().double()
    return float((output.detach().double() - reference64).norm() / reference64.norm())


def with_backend(
    block: ResidualBlock,
    backend: str,
    controller: str | None = DEFAULT,
    layers: Layers | None = None,
) -> ResidualBlock:
    """A copy of `block` (same weights, device and dtype) on another backend (and layers)."""
    config = dataclasses.replace(
        block.config,
        backend=backend,
        controller=controller,
        layers=block.config.layers if layers is None else layers,
    )
    parameter = next(block.parameters())
    copy = ResidualBlock(config, device=parameter.device, dtype=parameter.dtype)
    copy.load_state_dict(block.state_dict())
    return copy


def dense_block_diagonal(weight: torch.Tensor) -> torch.Tensor:
    """The [H*W, H*W] float64 matrix with the blocks `weight` [H, W, W] on its diagonal."""
    heads, block_width, _ = weight.shape
    dense = torch.zeros(heads * block_width, heads * block_width, dtype=torch.float64)
    for head in range(heads):
        rows = slice(head * block_width, (head + 1) * block_width)
        dense[rows, rows] = weight[head].double()
    return dense
