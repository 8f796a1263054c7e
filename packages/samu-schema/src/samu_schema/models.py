"""Pydantic models of a samu result file, schema version 1: the structural source of truth.

The models check shape, types and ranges (the exported JSON Schema is generated from them).
Rules that relate several fields (statistics against samples, deltas against peaks and
baselines, uniqueness, CPU-only nulls) are checked by :func:`samu_schema.validate`.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION: Final = 1
"""The ``schema_version`` these models describe."""

NonEmptyText = Annotated[str, Field(min_length=1)]
PositiveCount = Annotated[int, Field(ge=1)]
ByteCount = Annotated[int, Field(ge=0)]
PositiveMilliseconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeMilliseconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Protocol(BaseModel):
    """How the samples were taken (see the timing protocol). Extra fields are allowed."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    scope: NonEmptyText = Field(description="What one sample times, in words.")
    optimizer: NonEmptyText = Field(description="The optimizer stepped in every sample.")
    dtype: NonEmptyText = Field(description="Compute and storage precisions, in words.")
    order: Literal["AB/BA"] = Field(
        description="Sample order: rows in order for even rounds, reversed for odd rounds."
    )
    compile_and_optimizer_state_initialization_excluded: Literal[True] = Field(
        description="Warm-up (compilation, autotuning, optimizer states) is never timed."
    )


class Environment(BaseModel):
    """Where the samples were taken. Extra fields are allowed.

    ``cuda`` and ``gpu`` may be null only in a CPU smoke file (``device: "cpu"``), where
    ``gpu`` must be null.
    """

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    torch: NonEmptyText = Field(description="torch.__version__.")
    cuda: NonEmptyText | None = Field(
        description="torch.version.cuda; null only in a CPU smoke file."
    )
    gpu: NonEmptyText | None = Field(
        description="torch.cuda.get_device_name(); null in (and only in) a CPU smoke file."
    )
    device: Literal["cuda", "cpu"] = Field(
        default="cuda",
        description='Device timed; "cpu" marks a CPU smoke file. Absent means "cuda".',
    )
    triton: NonEmptyText | None = Field(default=None, description="triton.__version__.")
    driver: NonEmptyText | None = Field(default=None, description="NVIDIA driver version.")
    python: NonEmptyText | None = Field(default=None, description="Python version.")
    git_revision: NonEmptyText | None = Field(
        default=None, description="Git commit of the code that was timed."
    )
    hostname: NonEmptyText | None = Field(default=None, description="Machine name.")


class CaseConfig(BaseModel):
    """Block dimensions of a case. Extra fields are rejected."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    width: PositiveCount = Field(description="Model width D (elements).")
    rnn_width: PositiveCount = Field(description="Recurrence width R (elements).")
    depth: PositiveCount = Field(
        description="Depth the block is initialized for (scales the final init variance)."
    )


class OptimizerStep(BaseModel):
    """Timings of one row: the samples and their statistics, in milliseconds.

    Extra fields are rejected. Every statistic must equal the one recomputed from
    ``samples_ms`` (see :func:`samu_schema.summarize`).
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    samples_ms: list[PositiveMilliseconds] = Field(
        min_length=1, description="One complete training step per sample (ms), in order."
    )
    median_ms: PositiveMilliseconds = Field(description="Median of samples_ms (ms).")
    mean_ms: PositiveMilliseconds = Field(description="Arithmetic mean of samples_ms (ms).")
    std_ms: NonNegativeMilliseconds = Field(
        description="Population standard deviation (ddof = 0) of samples_ms (ms)."
    )
    mad_ms: NonNegativeMilliseconds = Field(
        description="Median absolute deviation from the median, unscaled (ms)."
    )
    minimum_ms: PositiveMilliseconds = Field(description="Smallest sample (ms).")
    maximum_ms: PositiveMilliseconds = Field(description="Largest sample (ms).")


class Row(BaseModel):
    """One (architecture, backend, controller) of a case. Extra fields are allowed.

    The six memory fields are null in (and only in) a CPU smoke file.
    """

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    architecture: NonEmptyText = Field(description='Temporal mixer, e.g. "rglru" or "samu".')
    backend: NonEmptyText = Field(description="Kernel backend name.")
    controller: NonEmptyText | None = Field(
        description="How SAMU's coordinates are computed; null when there is none (RG-LRU)."
    )
    optimizer_step: OptimizerStep = Field(description="Timings of the training step.")
    baseline_allocated_bytes: ByteCount | None = Field(
        description="torch.cuda.memory_allocated() before the first timed sample (bytes)."
    )
    baseline_reserved_bytes: ByteCount | None = Field(
        description="torch.cuda.memory_reserved() before the first timed sample (bytes)."
    )
    peak_allocated_bytes: ByteCount | None = Field(
        description="Maximum allocated memory over the timed samples (bytes)."
    )
    peak_reserved_bytes: ByteCount | None = Field(
        description="Maximum reserved memory over the timed samples (bytes)."
    )
    peak_allocated_delta_bytes: ByteCount | None = Field(
        description="peak_allocated_bytes - baseline_allocated_bytes (bytes)."
    )
    peak_reserved_delta_bytes: ByteCount | None = Field(
        description="peak_reserved_bytes - baseline_reserved_bytes (bytes)."
    )
    parameters: PositiveCount = Field(description="Trainable parameter elements of the block.")


class Case(BaseModel):
    """One input shape and block configuration, with all its rows. Extra fields are allowed."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    case: NonEmptyText = Field(description="Case name, unique in the file.")
    batch: PositiveCount = Field(description="Batch size B (sequences).")
    length: PositiveCount = Field(description="Sequence length L (tokens).")
    config: CaseConfig = Field(description="Block dimensions.")
    rows: list[Row] = Field(
        min_length=1,
        description="Rows timed together; (architecture, backend, controller) is unique.",
    )


class ResultFile(BaseModel):
    """A samu benchmark result file. Extra top-level fields are rejected."""

    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, title="samu result file (schema version 1)"
    )

    schema_version: Literal[1] = Field(description="Format version of this file.")
    protocol: Protocol = Field(description="How the samples were taken.")
    environment: Environment = Field(description="Software and hardware the samples come from.")
    cases: list[Case] = Field(min_length=1, description="Cases, each with a unique name.")
