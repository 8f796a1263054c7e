"""samu-schema: the samu benchmark result file as a validated contract.

- :func:`validate` checks a file (path or parsed data) and returns a :class:`ValidationReport`.
- :func:`summarize` computes a row's ``optimizer_step`` from its samples.
- :func:`write_result_file` validates and writes a result file atomically.
- :func:`json_schema` returns the shipped JSON Schema (Draft 2020-12).
"""

from samu_schema.json_schema import json_schema
from samu_schema.models import (
    SCHEMA_VERSION,
    Case,
    CaseConfig,
    Environment,
    OptimizerStep,
    Protocol,
    ResultFile,
    Row,
)
from samu_schema.problems import Problem, ProblemCode, ValidationReport
from samu_schema.reading import MAX_FILE_BYTES, ResultFileReadError
from samu_schema.summary import summarize
from samu_schema.validation import validate
from samu_schema.writing import InvalidResultError, write_result_file

__all__ = [
    "MAX_FILE_BYTES",
    "SCHEMA_VERSION",
    "Case",
    "CaseConfig",
    "Environment",
    "InvalidResultError",
    "OptimizerStep",
    "Problem",
    "ProblemCode",
    "Protocol",
    "ResultFile",
    "ResultFileReadError",
    "Row",
    "ValidationReport",
    "json_schema",
    "summarize",
    "validate",
    "write_result_file",
]
