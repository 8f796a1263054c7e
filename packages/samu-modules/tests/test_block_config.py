"""BlockConfig, the reference cases and exact parameter counts."""

from __future__ import annotations

import pytest

import samu_kernels
from samu_modules import REFERENCE_CASES, BlockConfig, ReferenceCase, ResidualBlock

PARAMETER_COUNTS = {
    ("state2048_short", "rglru"): 50_896_896,
    ("state2048_short", "samu"): 50_372_612,
    ("state2560_medium", "rglru"): 79_513_600,
    ("state2560_medium", "samu"): 78_694_404,
    ("400m_block_long", "rglru"): 31_230_976,
    ("400m_block_long", "samu"): 30_706_692,
}


def test_reference_cases_are_the_spec_table() -> None:
    assert dict(REFERENCE_CASES) == {
        "state2048_short": ReferenceCase(2048, 2048, 1),
        "state2560_medium": ReferenceCase(2560, 2560, 1),
        "400m_block_long": ReferenceCase(1536, 2048, 12),
    }


@pytest.mark.parametrize(("case", "architecture"), sorted(PARAMETER_COUNTS))
def test_parameter_counts_match_the_spec(case: str, architecture: str) -> None:
    config = BlockConfig.from_case(case, architecture=architecture)  # type: ignore[arg-type]
    block = ResidualBlock(config, device="meta")
    counted = sum(parameter.numel() for parameter in block.parameters())
    assert counted == PARAMETER_COUNTS[case, architecture]
    assert config.parameter_count == counted


def test_from_case_defaults() -> None:
    samu = BlockConfig.from_case("400m_block_long", architecture="samu")
    assert (samu.width, samu.rnn_width, samu.depth) == (1536, 2048, 12)
    assert samu.backend == samu_kernels.DEFAULT_BACKENDS["samu"]
    assert samu.controller == samu_kernels.DEFAULT_CONTROLLER
    assert (samu.num_heads, samu.conv1d_width, samu.mlp_expansion) == (16, 4, 3)
    assert samu.final_w_init_variance_scale == pytest.approx(2 / 12)
    rglru = BlockConfig.from_case("state2048_short", architecture="rglru")
    assert rglru.backend == samu_kernels.DEFAULT_BACKENDS["rglru"]
    assert rglru.controller is None


def test_from_case_overrides() -> None:
    config = BlockConfig.from_case(
        "state2048_short", architecture="samu", backend="reference", controller="reference"
    )
    assert (config.backend, config.controller) == ("reference", "reference")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"architecture": "mamba"}, "architecture"),
        ({"architecture": "rglru", "backend": "chunk7"}, "chunk"),
        ({"architecture": "rglru", "backend": "warp_speed"}, "backend"),
        ({"architecture": "rglru", "controller": "reference"}, "controller"),
        ({"architecture": "samu", "controller": "magic"}, "controller"),
        (
            {"architecture": "samu", "backend": "fused_grouped_prefix32_hierarchical_chunk16"},
            "fused",
        ),
        ({"architecture": "rglru", "width": 0}, "width"),
        ({"architecture": "rglru", "rnn_width": 50}, "num_heads"),
        ({"architecture": "rglru", "layers": "triton"}, "layers"),
    ],
)
def test_bad_config_is_refused(overrides: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"width": 64, "rnn_width": 64, "depth": 2, **overrides}
    with pytest.raises(ValueError, match=message):
        BlockConfig(**fields)  # type: ignore[arg-type]


def test_unknown_case_is_refused() -> None:
    with pytest.raises(ValueError, match="case must be one of"):
        BlockConfig.from_case("state4096_huge", architecture="samu")


def test_block_needs_a_config() -> None:
    with pytest.raises(TypeError, match="config must be a BlockConfig"):
        ResidualBlock({"width": 8})  # type: ignore[arg-type]
