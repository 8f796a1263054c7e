"""The full check of a result file: structure, then the protocol's cross-field rules."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from samu_schema.models import ResultFile
from samu_schema.problems import ValidationReport
from samu_schema.reading import read_json_file
from samu_schema.rules import check_rules
from samu_schema.structure import parse_structure


def validate(source: str | os.PathLike[str] | Mapping[str, Any] | ResultFile) -> ValidationReport:
    """Check a result file against schema version 1 and every rule of the timing protocol.

    Args:
        source: a path to a JSON result file, the parsed JSON as a mapping (nested pydantic
            models, tuples and other sequences inside it are accepted as their JSON form), or
            a :class:`ResultFile`.

    Returns:
        A :class:`ValidationReport`; ``ok`` is true when there are no problems. Structural
        problems (missing fields, wrong types, out-of-range numbers) are reported first; the
        cross-field rules (statistics, deltas, uniqueness, CPU-only nulls) are checked only
        once the structure is valid.

    Raises:
        ResultFileReadError: ``source`` is a path that cannot be read as JSON.
        TypeError: ``source`` is none of the accepted types.
    """
    if isinstance(source, (str, os.PathLike)):
        data: object = read_json_file(source)
    elif isinstance(source, (Mapping, BaseModel)):
        data = to_json_data(source)
    else:
        raise TypeError(
            f"source must be a path, a mapping or a ResultFile, found {type(source).__name__}"
        )
    return validate_json_data(data)


def validate_json_data(data: object) -> ValidationReport:
    """Validate parsed JSON (dicts, lists, numbers, strings, booleans, None) in full."""
    result, problems = parse_structure(data)
    if result is None:
        return ValidationReport(problems)
    return ValidationReport(check_rules(result))


def to_json_data(value: object) -> object:
    """The JSON form of ``value``: mappings become dicts, sequences lists, models their fields.

    Numbers (NaN included), strings, booleans and None are kept as they are; a model keeps
    only the fields that were set, so defaults are not written out.
    """
    if isinstance(value, BaseModel):
        return to_json_data(value.model_dump(exclude_unset=True))
    if isinstance(value, Mapping):
        return {key: to_json_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_data(item) for item in value]
    return value
