"""Limits of the recurrentgemma peer: fewer samples, and no compiled row for long inputs.

recurrentgemma's torch scan is a Python loop over time: a step costs L sequential
iterations of small kernels forward and again backward, so its rows take fewer samples
(:data:`RECURRENTGEMMA_SAMPLE_LIMIT`, recorded in the row), and under `torch.compile`
dynamo would unroll the loop into L copies of its body, so compiled rows are refused
above :data:`RECURRENTGEMMA_MAX_COMPILED_LENGTH` (recorded in the case's `skipped_rows`).
"""

from __future__ import annotations

from samu_bench.plan import SampleLimit

__all__ = [
    "RECURRENTGEMMA_MAX_COMPILED_LENGTH",
    "RECURRENTGEMMA_SAMPLE_LIMIT",
    "recurrentgemma_compile_refusal",
]

RECURRENTGEMMA_MAX_COMPILED_LENGTH = 512
"""Longest sequence for which recurrentgemma's block is run under `torch.compile`."""

RECURRENTGEMMA_SAMPLE_LIMIT = SampleLimit(
    max_samples=3,
    max_warmup=2,
    reason=(
        "recurrentgemma's torch scan is a Python loop over time (L sequential steps of "
        "small kernels, forward and backward): at most 3 timed samples after 2 warm-up steps"
    ),
)


def recurrentgemma_compile_refusal(length: int) -> str | None:
    """Why recurrentgemma's block is not compiled at sequence length `length`, or None."""
    if length <= RECURRENTGEMMA_MAX_COMPILED_LENGTH:
        return None
    return (
        f"torch.compile would unroll recurrentgemma's Python loop over time into {length} "
        f"copies of its body; compiled only up to L = {RECURRENTGEMMA_MAX_COMPILED_LENGTH}"
    )
