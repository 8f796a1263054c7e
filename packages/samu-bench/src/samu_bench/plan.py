"""What a run measures: cases (input and block sizes) and rows (modules timed together)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from samu_bench.errors import BenchError
from samu_modules import BlockConfig, ResidualBlock

RowKey = tuple[str, str, str | None]
"""A row's identity in a case: (architecture, backend, controller)."""


@dataclass(frozen=True)
class CaseSpec:
    """The sizes of one case: input `x: [batch, length, width]`, block widths and depth."""

    name: str
    batch: int
    length: int
    width: int
    rnn_width: int
    depth: int

    def __post_init__(self) -> None:
        if not self.name:
            raise BenchError("a case name must not be empty")
        for size in ("batch", "length", "width", "rnn_width", "depth"):
            value = getattr(self, size)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BenchError(
                    f"case {self.name!r}: {size} must be a positive integer, got {value!r}"
                )

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """Shape `(B, L, D)` of the block's input."""
        return (self.batch, self.length, self.width)


def build_residual_block(case: CaseSpec, row: Row, device: torch.device) -> nn.Module:
    """The samu-modules residual block of `row` at the sizes of `case`, fp32 on `device`."""
    config = BlockConfig(
        width=case.width,
        rnn_width=case.rnn_width,
        depth=case.depth,
        architecture=row.architecture,  # type: ignore[arg-type]  # checked by BlockConfig
        backend=row.backend,
        controller=row.controller,
    )
    return ResidualBlock(config, device=device)


ModuleBuilder = Callable[[CaseSpec, "Row", torch.device], nn.Module]
"""Builds the fp32 module a row times, on the given device, for a case's sizes.

The module maps `x: [B, L, D]` (fp32) to an output; any output shape works."""


COMPILED_SUFFIX = "+compile"
"""Appended to the recorded backend of a compiled row, so eager and compiled rows of one
backend can share a case (a row's identity is unique within a case)."""

CUDA_GRAPHS_SUFFIX = "+cudagraphs"
"""Appended after `+compile` for a compiled row replayed from CUDA graphs."""

STEP_GRAPH_SUFFIX = "+stepgraph"
"""Appended (after any `+compile`) for a row whose whole step is one replayed CUDA graph."""


@dataclass(frozen=True)
class SampleLimit:
    """Caps on a row's timed samples and warm-up steps, and why (recorded in the row).

    For rows too slow for the run's settings (e.g. a peer whose scan is a Python loop).

    Attributes:
        max_samples: at most this many timed samples (>= 1).
        max_warmup: at most this many warm-up steps (>= 2, the protocol's minimum).
        reason: one sentence recorded as the row's `sample_limit_reason`.
    """

    max_samples: int
    max_warmup: int
    reason: str

    def __post_init__(self) -> None:
        if self.max_samples < 1:
            raise ValueError(f"max_samples must be at least 1, got {self.max_samples}")
        if self.max_warmup < 2:
            raise ValueError(f"max_warmup must be at least 2, got {self.max_warmup}")
        if not self.reason:
            raise ValueError("reason must not be empty")

    def row_extras(self, requested: ProtocolSettings) -> dict[str, Any]:
        """Extra fields of the result row: what the run asked for, the warm-up run, and why."""
        return {
            "samples_requested": requested.samples,
            "warmup_steps": min(requested.warmup, self.max_warmup),
            "sample_limit_reason": self.reason,
        }


@dataclass(frozen=True)
class Row:
    """One module timed in a case, identified by (architecture, backend, controller).

    `compiled` wraps the module in `torch.compile` before warm-up; the row is then recorded
    with backend `<backend>+compile` and the extra field `compiled: true`. `cuda_graphs`
    (compiled rows only) compiles with `mode="reduce-overhead"`, so the forward and backward
    graphs replay from CUDA graphs (backend `<backend>+compile+cudagraphs`, extra field
    `cuda_graphs: true`; the protocol reads its memory from the recording step). `step_graph`
    captures the whole step, gradient clearing, forward, backward and the optimizer update
    (AdamW with `capturable=True`), as one CUDA graph after warm-up and times its replays
    (backend `<backend>[+compile]+stepgraph`, extra field `step_graph: true`; memory read
    from the capture). `build_module`
    makes the module; the default is the samu residual block, and tests or peer
    implementations plug in their own. `sample_limit` caps the row's samples and warm-up
    below the run's settings (recorded in the row).
    """

    architecture: str
    backend: str
    controller: str | None
    compiled: bool = False
    build_module: ModuleBuilder = field(default=build_residual_block, compare=False, repr=False)
    sample_limit: SampleLimit | None = None
    cuda_graphs: bool = False
    step_graph: bool = False

    def __post_init__(self) -> None:
        if self.cuda_graphs and not self.compiled:
            raise BenchError(
                f"row {self.label}: CUDA graphs are replayed by torch.compile; "
                "a row with cuda_graphs must be compiled too"
            )
        if self.cuda_graphs and self.step_graph:
            raise BenchError(
                f"row {self.label}: cuda_graphs (torch.compile's graphs) and step_graph (the "
                "whole step as one graph) exclude each other; choose one"
            )

    @property
    def replays_graphs(self) -> bool:
        """Whether the row's timed steps replay CUDA graphs (either kind)."""
        return self.cuda_graphs or self.step_graph

    @property
    def recorded_backend(self) -> str:
        """The backend name written to the result file."""
        suffixes = [
            (self.compiled, COMPILED_SUFFIX),
            (self.cuda_graphs, CUDA_GRAPHS_SUFFIX),
            (self.step_graph, STEP_GRAPH_SUFFIX),
        ]
        return self.backend + "".join(suffix for chosen, suffix in suffixes if chosen)

    @property
    def key(self) -> RowKey:
        """(architecture, recorded backend, controller): unique within a case."""
        return (self.architecture, self.recorded_backend, self.controller)

    @property
    def label(self) -> str:
        """`architecture:backend[:controller]` of the key."""
        return row_label(self.key)


def row_label(key: RowKey) -> str:
    """The command-line spelling of a row key, e.g. `samu:reference:reference`."""
    architecture, backend, controller = key
    return f"{architecture}:{backend}" + (f":{controller}" if controller is not None else "")


@dataclass(frozen=True)
class SkippedRow:
    """A row asked for but not run in a case, recorded in the case's `skipped_rows`."""

    architecture: str
    backend: str
    controller: str | None
    reason: str

    @property
    def key(self) -> RowKey:
        """(architecture, backend, controller) as it would have been recorded."""
        return (self.architecture, self.backend, self.controller)

    def entry(self) -> dict[str, str | None]:
        """The JSON object `{architecture, backend, controller, reason}`."""
        return {
            "architecture": self.architecture,
            "backend": self.backend,
            "controller": self.controller,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CasePlan:
    """A case, the rows timed together in it (each key at most once), and skipped rows."""

    case: CaseSpec
    rows: tuple[Row, ...]
    skipped: tuple[SkippedRow, ...] = ()

    def __post_init__(self) -> None:
        if not self.rows:
            raise BenchError(f"case {self.case.name!r} has no rows")
        keys = [row.key for row in self.rows] + [row.key for row in self.skipped]
        for key in keys:
            if keys.count(key) > 1:
                raise BenchError(
                    f"case {self.case.name!r}: row {row_label(key)} is given twice; "
                    "a result file holds each (architecture, backend, controller) once per case"
                )


@dataclass(frozen=True)
class ProtocolSettings:
    """Sampling settings of a run: timed samples and warm-up steps per row, and the seed."""

    samples: int = 10
    warmup: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise BenchError(f"samples must be at least 1, got {self.samples}")
        if self.warmup < 2:
            raise BenchError(
                f"warmup must be at least 2 (optimizer states and compilation), got {self.warmup}"
            )

    def for_row(self, row: Row) -> ProtocolSettings:
        """The settings `row` runs with: these, capped by the row's sample limit."""
        limit = row.sample_limit
        if limit is None:
            return self
        return dataclasses.replace(
            self,
            samples=min(self.samples, limit.max_samples),
            warmup=min(self.warmup, limit.max_warmup),
        )
