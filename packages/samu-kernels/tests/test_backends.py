"""The backend-name grammar, the defaults and the (architecture, backend, controller) check."""

from __future__ import annotations

import itertools

import pytest

import samu_kernels
from samu_kernels import BackendNameError, check_backend, parse_backend


def _all_valid_names() -> list[tuple[str, dict[str, object]]]:
    cases = []
    flags = ("fused", "fused_output", "fused_write", "shared_sfu")
    for chosen in itertools.product((False, True), repeat=len(flags)):
        features: dict[str, object] = dict(zip(flags, chosen, strict=True))
        prefix = [flag for flag, on in features.items() if on]
        for group in (None, 0, 2, 1024):
            middle = [] if group is None else ["hierarchical"]
            if group:
                middle.insert(0, f"grouped_prefix{group}")
            for chunk in (8, 16, 256):
                name = "_".join([*prefix, *middle, f"chunk{chunk}"])
                cases.append(
                    (
                        name,
                        {
                            **features,
                            "hierarchical": group is not None,
                            "grouped_prefix": group or None,
                            "chunk": chunk,
                        },
                    )
                )
    return cases


@pytest.mark.parametrize(("name", "features"), _all_valid_names())
def test_every_valid_name_parses_to_its_features(name: str, features: dict[str, object]) -> None:
    spec = parse_backend(name)
    assert spec == samu_kernels.BackendSpec(name=name, **features)  # type: ignore[arg-type]
    assert spec.is_triton


def test_token_features_of_a_full_name() -> None:
    spec = parse_backend(
        "fused_fused_output_fused_write_shared_sfu_grouped_prefix8_hierarchical_chunk64"
    )
    assert spec == samu_kernels.BackendSpec(
        name="fused_fused_output_fused_write_shared_sfu_grouped_prefix8_hierarchical_chunk64",
        fused=True,
        fused_output=True,
        fused_write=True,
        shared_sfu=True,
        grouped_prefix=8,
        hierarchical=True,
        chunk=64,
    )


def test_reference_and_peer_names() -> None:
    assert parse_backend("reference").is_reference
    peer = parse_backend("peer:fla_chunk_hgrn")
    assert peer.external == "peer:fla_chunk_hgrn"
    assert peer.chunk is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("chunk", "unknown token"),
        ("fused", "last token must be chunk"),
        ("fused_chunk16_", "ends with '_'"),
        ("turbo_chunk16", "unknown token"),
        ("hierarchical_fused_chunk16", "out of order"),
        ("shared_sfu_fused_write_chunk16", "out of order"),
        ("chunk16_hierarchical", "out of order"),
        ("chunk16_chunk32", "more than once"),
        ("fused_fused_chunk16", "more than once"),
        ("grouped_prefix32_chunk16", "needs hierarchical"),
        ("hierarchical_grouped_prefix32_chunk16", "out of order"),
        ("chunk12", "power of two"),
        ("chunk4", "power of two"),
        ("chunk512", "power of two"),
        ("chunk016", "power of two"),
        ("grouped_prefix1_hierarchical_chunk16", "power of two"),
        ("grouped_prefix48_hierarchical_chunk16", "power of two"),
        ("grouped_prefix2048_hierarchical_chunk16", "power of two"),
        ("peer:", "peer name"),
    ],
)
def test_invalid_names_are_refused_listing_the_valid_tokens(name: str, problem: str) -> None:
    with pytest.raises(BackendNameError, match="Valid tokens") as info:
        parse_backend(name)
    assert problem in str(info.value)
    for token in samu_kernels.VALID_TOKENS:
        assert token in str(info.value)
    assert isinstance(info.value, ValueError)


def test_non_string_name_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="backend must be a str"):
        parse_backend(16)


def test_reference_file_rows_are_the_defaults_and_valid() -> None:
    assert samu_kernels.DEFAULT_BACKENDS == {
        "rglru": "fused_grouped_prefix32_hierarchical_chunk16",
        "samu": "fused_output_fused_write_shared_sfu_chunk32",
    }
    assert len(samu_kernels.REFERENCE_FILE_ROWS) == 3
    for architecture, backend, controller in samu_kernels.REFERENCE_FILE_ROWS:
        assert check_backend(architecture, backend, controller).is_triton
    rows = {(a, b) for a, b, _ in samu_kernels.REFERENCE_FILE_ROWS}
    for architecture, backend in samu_kernels.DEFAULT_BACKENDS.items():
        assert (architecture, backend) in rows
    assert samu_kernels.CONTROLLERS == ("fp32_fused_coords", "reference")
    assert samu_kernels.DEFAULT_CONTROLLER == "fp32_fused_coords"


@pytest.mark.parametrize(
    ("architecture", "backend", "controller", "argument"),
    [
        ("mamba", "reference", None, "architecture"),
        ("rglru", "chunk16", "reference", "controller"),
        ("samu", "chunk16", None, "controller"),
        ("samu", "chunk16", "fused", "controller"),
        ("samu", "fused_chunk16", "fp32_fused_coords", "RG-LRU-only"),
        ("rglru", "fused_chunk7", None, "invalid backend name"),
    ],
)
def test_check_backend_names_the_argument_that_does_not_fit(
    architecture: str, backend: str, controller: str | None, argument: str
) -> None:
    with pytest.raises(ValueError, match=argument):
        check_backend(architecture, backend, controller)


@pytest.mark.parametrize("controller", ["fp32_fused_coords", "reference"])
def test_samu_accepts_both_controllers_on_every_kind_of_backend(controller: str) -> None:
    for backend in ("reference", "chunk16", "peer:anything", "fused_output_chunk32"):
        assert check_backend("samu", backend, controller).name == backend
