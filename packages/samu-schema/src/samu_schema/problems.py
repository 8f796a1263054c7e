"""What validation reports: typed problems with a path into the file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum


class ProblemCode(str, Enum):
    """Kind of a problem; the value is the stable string written by ``--json``."""

    MISSING = "missing"
    UNEXPECTED_FIELD = "unexpected_field"
    WRONG_TYPE = "wrong_type"
    UNSUPPORTED_VALUE = "unsupported_value"
    OUT_OF_RANGE = "out_of_range"
    NOT_FINITE = "not_finite"
    TOO_SHORT = "too_short"
    INVALID_VALUE = "invalid_value"
    STATISTIC_MISMATCH = "statistic_mismatch"
    DELTA_MISMATCH = "delta_mismatch"
    PEAK_BELOW_BASELINE = "peak_below_baseline"
    DUPLICATE_CASE = "duplicate_case"
    DUPLICATE_ROW = "duplicate_row"
    NULL_OUTSIDE_CPU_FILE = "null_outside_cpu_file"
    VALUE_IN_CPU_FILE = "value_in_cpu_file"


@dataclass(frozen=True)
class Problem:
    """One reason a result file is invalid.

    Attributes:
        code: the kind of problem.
        path: where it is, e.g. ``cases[0].rows[1].optimizer_step.median_ms``; ``""`` is
            the whole file.
        message: what was expected and what was found.
    """

    code: ProblemCode
    path: str
    message: str

    def to_json(self) -> dict[str, str]:
        """The problem as a JSON object: ``{"code", "path", "message"}``."""
        return {"code": self.code.value, "path": self.path, "message": self.message}


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of :func:`samu_schema.validate`: valid when ``problems`` is empty."""

    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the file satisfies every rule."""
        return not self.problems


def format_path(location: Sequence[str | int]) -> str:
    """Join field names and list indices: ``("cases", 0, "case")`` -> ``cases[0].case``."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def describe_value(value: object) -> str:
    """A short JSON-flavoured description of a found value, for messages."""
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)  # null, true, 12, 2.5, NaN, Infinity
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"string {json.dumps(shown, ensure_ascii=False)}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    return type(value).__name__
