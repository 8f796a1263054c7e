"""Loading the weights of a `recurrentgemma.torch.modules.ResidualBlock`.

Parameter names are recurrentgemma's except two: the RG-LRU is `recurrent_block.mixer`
(recurrentgemma: `recurrent_block.rg_lru`), and the MLP's up projection is one
`nn.Linear` `mlp_block.ffw_up` [2E, D] (recurrentgemma: an einsum weight `w` [2, D, E] and
bias `b` [2, 1, 1, E]; gate rows first, value rows second).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from samu_modules.config import DEFAULT, BlockConfig, Layers, depth_from_variance_scale
from samu_modules.residual_block import ResidualBlock

_RGLRU_PREFIX = "recurrent_block.rg_lru."
_MIXER_PREFIX = "recurrent_block.mixer."
_UP_WEIGHT = "mlp_block.ffw_up.w"
_UP_BIAS = "mlp_block.ffw_up.b"


def convert_recurrentgemma_state_dict(
    state_dict: Mapping[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """Rename and reshape a recurrentgemma ResidualBlock state dict into ours (RG-LRU)."""
    converted: dict[str, torch.Tensor] = {}
    for key, value in state_dict.items():
        if key == _UP_WEIGHT:
            # [2, D, E] -> [2E, D]: row c*E + e is the weight of output e of projection c.
            converted["mlp_block.ffw_up.weight"] = value.transpose(1, 2).reshape(-1, value.shape[1])
        elif key == _UP_BIAS:
            converted["mlp_block.ffw_up.bias"] = value.reshape(-1)
        elif key.startswith(_RGLRU_PREFIX):
            converted[_MIXER_PREFIX + key.removeprefix(_RGLRU_PREFIX)] = value
        else:
            converted[key] = value
    return converted


def load_recurrentgemma_state_dict(
    block: ResidualBlock, state_dict: Mapping[str, torch.Tensor]
) -> None:
    """Copy the weights of a recurrentgemma ResidualBlock's `state_dict()` into `block`.

    Raises:
        ValueError: if `block` is not an RG-LRU block, or a key or shape does not match.
    """
    if block.config.architecture != "rglru":
        raise ValueError(
            "block must have architecture 'rglru' to load recurrentgemma weights, got "
            f"{block.config.architecture!r}"
        )
    converted = convert_recurrentgemma_state_dict(state_dict)
    expected = block.state_dict()
    missing = sorted(expected.keys() - converted.keys())
    unexpected = sorted(converted.keys() - expected.keys())
    if missing or unexpected:
        raise ValueError(
            f"state_dict does not match the block: missing {missing}, unexpected {unexpected}"
        )
    for key, value in converted.items():
        if value.shape != expected[key].shape:
            raise ValueError(
                f"state_dict[{key!r}] must have shape {list(expected[key].shape)}, "
                f"got {list(value.shape)}"
            )
    block.load_state_dict(converted)


def from_recurrentgemma(
    block: nn.Module,
    *,
    backend: str = DEFAULT,
    layers: Layers = "auto",
    device: torch.device | str | None = None,
) -> ResidualBlock:
    """A `ResidualBlock` equal to a recurrent `recurrentgemma.torch.modules.ResidualBlock`.

    The config (widths, heads, conv width, MLP expansion, depth = 2 /
    final_w_init_variance_scale) is read from `block`; the weights are copied.

    Args:
        block: a recurrentgemma ResidualBlock with `TemporalBlockType.RECURRENT`.
        backend: RG-LRU scan backend of the new block ("reference" runs on any device).
        layers: fused Triton or PyTorch norms and GELUs (`BlockConfig.layers`).
        device: device of the new block; default: that of `block`'s parameters.

    Returns:
        The new block, with parameters in the dtype of `block`'s.

    Raises:
        ValueError: if `block` is not a recurrent recurrentgemma ResidualBlock.
    """
    settings = vars(block)  # recurrentgemma keeps its constructor arguments as attributes
    temporal_type = getattr(settings.get("temporal_block_type"), "name", None)
    if temporal_type != "RECURRENT":
        raise ValueError(
            "block must be a recurrentgemma ResidualBlock with temporal_block_type "
            f"RECURRENT, got {type(block).__name__} ({temporal_type})"
        )
    width = int(settings["width"])
    expanded_width = int(settings["mlp_expanded_width"])
    if expanded_width % width:
        raise ValueError(
            f"block.mlp_expanded_width ({expanded_width}) must be a multiple of its width ({width})"
        )
    config = BlockConfig(
        width=width,
        rnn_width=int(settings["lru_width"] or width),
        depth=depth_from_variance_scale(float(settings["final_w_init_variance_scale"])),
        architecture="rglru",
        backend=backend,
        num_heads=int(settings["num_heads"]),
        conv1d_width=int(settings["conv1d_temporal_width"]),
        mlp_expansion=expanded_width // width,
        layers=layers,
    )
    reference = next(block.parameters())
    ours = ResidualBlock(
        config, device=reference.device if device is None else device, dtype=reference.dtype
    )
    load_recurrentgemma_state_dict(ours, block.state_dict())
    return ours
