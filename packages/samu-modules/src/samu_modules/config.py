"""The block configuration and the three reference cases."""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, get_args

import samu_kernels

Architecture = Literal["rglru", "samu"]
"""The temporal mixer of the block."""

ARCHITECTURES: tuple[Architecture, ...] = get_args(Architecture)

Layers = Literal["auto", "fused", "torch"]
"""How the block computes its norms and GELUs (see `BlockConfig.layers`)."""

LAYERS: tuple[Layers, ...] = get_args(Layers)

DEFAULT = "default"
"""Backend/controller value resolved to the architecture's default by `BlockConfig`."""


class ReferenceCase(NamedTuple):
    """Shape of one reference case: the block's widths and the depth of its model."""

    width: int
    rnn_width: int
    depth: int


REFERENCE_CASES: Mapping[str, ReferenceCase] = types.MappingProxyType(
    {
        "state2048_short": ReferenceCase(width=2048, rnn_width=2048, depth=1),
        "state2560_medium": ReferenceCase(width=2560, rnn_width=2560, depth=1),
        "400m_block_long": ReferenceCase(width=1536, rnn_width=2048, depth=12),
    }
)
"""The reference cases by name (read-only)."""


def _check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclasses.dataclass(frozen=True)
class BlockConfig:
    """Everything that defines one Griffin residual block.

    Attributes:
        width: model width D (input and output features).
        rnn_width: recurrence width R.
        depth: number of blocks of the model the block is taken from; it only sets the
            initialisation scale `2 / depth` of the block's last projections.
        architecture: the temporal mixer, "rglru" or "samu".
        backend: samu-kernels scan backend; "default" picks
            `samu_kernels.DEFAULT_BACKENDS[architecture]`.
        controller: SAMU controller; "default" picks `samu_kernels.DEFAULT_CONTROLLER` for
            SAMU and None for RG-LRU (which has no controller).
        num_heads: number of diagonal blocks of the RG-LRU gate matrices.
        conv1d_width: temporal width of the causal convolution.
        mlp_expansion: hidden width of the MLP as a multiple of `width`.
        layers: "fused" runs the norms (the second one with the residual add) and the
            GELUs through samu-kernels' fused Triton ops; "torch" composes PyTorch ops
            (what Inductor fuses best under `torch.compile`); "auto" is "fused" in eager
            mode where Triton serves the input (CUDA, or TRITON_INTERPRET=1) with a
            float32/bfloat16 dtype and float32 parameters, else "torch".

    Raises:
        ValueError: on a non-positive size, an unknown architecture or layers, an RG-LRU
            `rnn_width` not divisible by `num_heads`, or a backend/controller that does not
            fit the architecture (checked by `samu_kernels.check_backend`).
    """

    width: int
    rnn_width: int
    depth: int
    architecture: Architecture
    backend: str = DEFAULT
    controller: str | None = DEFAULT
    num_heads: int = 16
    conv1d_width: int = 4
    mlp_expansion: int = 3
    layers: Layers = "auto"

    def __post_init__(self) -> None:
        for name in ("width", "rnn_width", "depth", "num_heads", "conv1d_width", "mlp_expansion"):
            _check_positive_int(name, getattr(self, name))
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"architecture must be one of {list(ARCHITECTURES)}, got {self.architecture!r}"
            )
        if self.layers not in LAYERS:
            raise ValueError(f"layers must be one of {list(LAYERS)}, got {self.layers!r}")
        if self.architecture == "rglru" and self.rnn_width % self.num_heads:
            raise ValueError(
                f"rnn_width ({self.rnn_width}) must be divisible by num_heads "
                f"({self.num_heads}) for the RG-LRU block-diagonal gates"
            )
        if self.backend == DEFAULT:
            object.__setattr__(self, "backend", samu_kernels.DEFAULT_BACKENDS[self.architecture])
        if self.controller == DEFAULT:
            controller = samu_kernels.DEFAULT_CONTROLLER if self.architecture == "samu" else None
            object.__setattr__(self, "controller", controller)
        samu_kernels.check_backend(self.architecture, self.backend, self.controller)

    @classmethod
    def from_case(cls, case: str, architecture: Architecture, **overrides: Any) -> BlockConfig:
        """The config of reference case `case` (a key of `REFERENCE_CASES`).

        `overrides` are further `BlockConfig` fields (backend, controller, num_heads, ...).
        """
        if case not in REFERENCE_CASES:
            raise ValueError(f"case must be one of {list(REFERENCE_CASES)}, got {case!r}")
        return cls(**REFERENCE_CASES[case]._asdict(), architecture=architecture, **overrides)

    @property
    def mlp_width(self) -> int:
        """Hidden width of the MLP, `mlp_expansion * width`."""
        return self.mlp_expansion * self.width

    @property
    def final_w_init_variance_scale(self) -> float:
        """Variance scale `2 / depth` of `linear_out` and the MLP down projection."""
        return 2.0 / self.depth

    @property
    def parameter_count(self) -> int:
        """Number of parameters of the block, from the closed-form count."""
        d, r, e = self.width, self.rnn_width, self.mlp_width
        mlp = 2 * d * e + 2 * e + e * d + d
        norms = 2 * d
        linears = 3 * d * r + 2 * r + d
        conv = (self.conv1d_width + 1) * r
        rglru_mixer = r + 2 * (r * r // self.num_heads + r)
        mixer = rglru_mixer if self.architecture == "rglru" else 3 * r + 4
        return mlp + norms + linears + conv + mixer


def depth_from_variance_scale(final_w_init_variance_scale: float) -> int:
    """The depth whose Griffin scale `2 / depth` equals `final_w_init_variance_scale`."""
    if not final_w_init_variance_scale > 0:
        raise ValueError(
            f"final_w_init_variance_scale must be positive, got {final_w_init_variance_scale!r}"
        )
    depth = round(2.0 / final_w_init_variance_scale)
    if depth < 1 or not math.isclose(2.0 / depth, final_w_init_variance_scale, rel_tol=1e-6):
        raise ValueError(
            "final_w_init_variance_scale must be 2 / depth for a positive int depth, got "
            f"{final_w_init_variance_scale!r}"
        )
    return depth
