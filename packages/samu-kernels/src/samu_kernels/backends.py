"""Backend names: the grammar, the parsed :class:`BackendSpec`, defaults and compatibility.

A Triton backend name is its tokens joined by ``_`` in this order::

    [fused] [fused_output] [fused_write] [shared_sfu] [grouped_prefix<G>] [hierarchical] chunk<T>

``reference`` names the PyTorch oracle and ``peer:<id>`` a linear scan registered with
:func:`samu_kernels.register_linear_scan`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from samu_kernels.controllers import CONTROLLERS

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_BACKENDS",
    "REFERENCE_BACKEND",
    "REFERENCE_FILE_ROWS",
    "VALID_TOKENS",
    "BackendNameError",
    "BackendSpec",
    "check_backend",
    "parse_backend",
]

ARCHITECTURES: tuple[str, ...] = ("rglru", "samu")
REFERENCE_BACKEND = "reference"
PEER_PREFIX = "peer:"

# Token order of the grammar; the position in this tuple is the order a name must follow.
_ORDERED_TOKENS: tuple[str, ...] = (
    "fused",
    "fused_output",
    "fused_write",
    "shared_sfu",
    "grouped_prefix<G>",
    "hierarchical",
    "chunk<T>",
)
VALID_TOKENS: tuple[str, ...] = (*_ORDERED_TOKENS, REFERENCE_BACKEND, f"{PEER_PREFIX}<id>")

CHUNK_RANGE = (8, 256)
GROUP_RANGE = (2, 1024)

DEFAULT_BACKENDS: dict[str, str] = {
    "rglru": "fused_grouped_prefix32_hierarchical_chunk16",
    "samu": "fused_output_fused_write_shared_sfu_chunk32",
}
REFERENCE_FILE_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("rglru", "fused_grouped_prefix32_hierarchical_chunk16", None),
    ("samu", "fused_output_fused_write_shared_sfu_chunk32", "fp32_fused_coords"),
    (
        "samu",
        "fused_output_fused_write_shared_sfu_grouped_prefix64_hierarchical_chunk32",
        "fp32_fused_coords",
    ),
)

# Longest alternatives first so that "fused_output" is not read as "fused" + "output".
_TOKEN_PATTERN = re.compile(
    r"(?P<token>fused_output|fused_write|fused|shared_sfu|grouped_prefix(?P<group>\d+)"
    r"|hierarchical|chunk(?P<chunk>\d+))(?:_|$)"
)
_TOKEN_RANK: dict[str, int] = {
    token.split("<")[0]: rank for rank, token in enumerate(_ORDERED_TOKENS)
}
_PEER_PATTERN = re.compile(r"peer:[A-Za-z0-9][A-Za-z0-9_.\-]*")


class BackendNameError(ValueError):
    """A backend name that does not follow the grammar; the message lists the valid tokens."""

    def __init__(self, name: str, problem: str) -> None:
        grammar = " ".join(f"[{token}]" for token in _ORDERED_TOKENS[:-1]) + " chunk<T>"
        super().__init__(
            f"invalid backend name {name!r}: {problem}. A Triton backend name is "
            f"'{grammar}' joined by '_' in that order (T a power of two in "
            f"{CHUNK_RANGE[0]}..{CHUNK_RANGE[1]}, G a power of two in "
            f"{GROUP_RANGE[0]}..{GROUP_RANGE[1]}); or 'reference'; or 'peer:<id>'. "
            f"Valid tokens: {', '.join(VALID_TOKENS)}"
        )


@dataclass(frozen=True)
class BackendSpec:
    """A parsed backend name.

    ``chunk`` is None only for the reference and peer backends; ``external`` holds the
    ``peer:<id>`` name of a registered linear scan, else None.
    """

    name: str
    fused: bool = False
    fused_output: bool = False
    fused_write: bool = False
    shared_sfu: bool = False
    grouped_prefix: int | None = None
    hierarchical: bool = False
    chunk: int | None = None
    is_reference: bool = False
    external: str | None = None

    @property
    def is_triton(self) -> bool:
        """True for the Triton kernel backends (neither reference nor peer)."""
        return not self.is_reference and self.external is None


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _checked_size(name: str, token: str, text: str, bounds: tuple[int, int]) -> int:
    value = int(text)
    if text != str(value) or not _is_power_of_two(value) or not bounds[0] <= value <= bounds[1]:
        raise BackendNameError(
            name, f"{token}{text}: the number must be a power of two in {bounds[0]}..{bounds[1]}"
        )
    return value


def parse_backend(name: str) -> BackendSpec:
    """Parse a backend name into its :class:`BackendSpec`.

    Raises:
        TypeError: ``name`` is not a str.
        BackendNameError: the name does not follow the grammar (unknown or repeated token,
            wrong order, ``grouped_prefix`` without ``hierarchical``, a size out of range).
    """
    if not isinstance(name, str):
        raise TypeError(f"backend must be a str, got {type(name).__name__}")
    if name == REFERENCE_BACKEND:
        return BackendSpec(name=name, is_reference=True)
    if name.startswith(PEER_PREFIX):
        if not _PEER_PATTERN.fullmatch(name):
            raise BackendNameError(name, "a peer name is 'peer:' followed by letters/digits/_.-")
        return BackendSpec(name=name, external=name)
    if not name:
        raise BackendNameError(name, "the name is empty")

    features: dict[str, object] = {}
    last_rank = -1
    position = 0
    while position < len(name):
        match = _TOKEN_PATTERN.match(name, position)
        if match is None:
            raise BackendNameError(name, f"unknown token at {name[position:]!r}")
        token = match.group("token")
        key = re.sub(r"\d+$", "", token)
        rank = _TOKEN_RANK[key]
        if rank == last_rank:
            raise BackendNameError(name, f"token {key!r} appears more than once")
        if rank < last_rank:
            raise BackendNameError(name, f"token {key!r} is out of order")
        if last_rank == _TOKEN_RANK["chunk"]:
            raise BackendNameError(name, "chunk<T> must be the last token")
        last_rank = rank
        if key == "grouped_prefix":
            features["grouped_prefix"] = _checked_size(name, key, match.group("group"), GROUP_RANGE)
        elif key == "chunk":
            features["chunk"] = _checked_size(name, key, match.group("chunk"), CHUNK_RANGE)
        else:
            features[key] = True
        position = match.end()
        if name.endswith("_") and position == len(name):
            raise BackendNameError(name, "the name ends with '_'")

    if "chunk" not in features:
        raise BackendNameError(name, "the last token must be chunk<T>")
    if "grouped_prefix" in features and "hierarchical" not in features:
        raise BackendNameError(name, "grouped_prefix<G> needs hierarchical")
    return BackendSpec(
        name=name,
        fused=bool(features.get("fused", False)),
        fused_output=bool(features.get("fused_output", False)),
        fused_write=bool(features.get("fused_write", False)),
        shared_sfu=bool(features.get("shared_sfu", False)),
        grouped_prefix=features.get("grouped_prefix"),  # type: ignore[arg-type]
        hierarchical=bool(features.get("hierarchical", False)),
        chunk=features.get("chunk"),  # type: ignore[arg-type]
    )


def check_backend(architecture: str, backend: str, controller: str | None) -> BackendSpec:
    """Check that (architecture, backend, controller) is a valid combination.

    ``architecture`` is "rglru" or "samu". RG-LRU takes ``controller=None``; SAMU takes a
    controller from :data:`samu_kernels.CONTROLLERS`. The ``fused`` token is RG-LRU-only
    (SAMU's in-kernel gate computation is the ``fp32_fused_coords`` controller).

    Returns:
        The parsed :class:`BackendSpec`.

    Raises:
        ValueError: naming the argument that does not fit (``BackendNameError`` for a
            malformed backend name).
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {architecture!r}")
    spec = parse_backend(backend)
    if architecture == "rglru":
        if controller is not None:
            raise ValueError(
                f"controller must be None for architecture 'rglru', got {controller!r}"
            )
        return spec
    if controller not in CONTROLLERS:
        raise ValueError(
            f"controller must be one of {CONTROLLERS} for architecture 'samu', got {controller!r}"
        )
    if spec.fused:
        raise ValueError(
            f"backend {backend!r} does not fit architecture 'samu': the token 'fused' is "
            "RG-LRU-only (SAMU computes its gates in-kernel through the controller "
            "'fp32_fused_coords')"
        )
    return spec
