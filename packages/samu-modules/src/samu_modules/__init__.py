"""samu-modules: the Griffin residual block with an RG-LRU or SAMU temporal mixer.

Build one with `ResidualBlock(BlockConfig.from_case("state2048_short", architecture="samu"))`;
see `docs/modules.md` for the math, streaming and loading recurrentgemma weights.
"""

from samu_modules.block_diagonal import BlockDiagonalLinear
from samu_modules.config import (
    ARCHITECTURES,
    DEFAULT,
    LAYERS,
    REFERENCE_CASES,
    Architecture,
    BlockConfig,
    Layers,
    ReferenceCase,
)
from samu_modules.conv import Conv1D
from samu_modules.loader import (
    convert_recurrentgemma_state_dict,
    from_recurrentgemma,
    load_recurrentgemma_state_dict,
)
from samu_modules.mlp import MLPBlock
from samu_modules.norm import RMSNorm
from samu_modules.recurrent_block import RecurrentBlock
from samu_modules.residual_block import ResidualBlock
from samu_modules.rglru import RGLRU
from samu_modules.samu import SAMU
from samu_modules.state import BlockState

__all__ = [
    "ARCHITECTURES",
    "DEFAULT",
    "LAYERS",
    "REFERENCE_CASES",
    "RGLRU",
    "SAMU",
    "Architecture",
    "BlockConfig",
    "BlockDiagonalLinear",
    "BlockState",
    "Conv1D",
    "Layers",
    "MLPBlock",
    "RMSNorm",
    "RecurrentBlock",
    "ReferenceCase",
    "ResidualBlock",
    "convert_recurrentgemma_state_dict",
    "from_recurrentgemma",
    "load_recurrentgemma_state_dict",
]
