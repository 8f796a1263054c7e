"""Structural validation: the pydantic models' errors, as problems."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from samu_schema.models import CaseConfig, OptimizerStep, ResultFile
from samu_schema.problems import Problem, ProblemCode, describe_value, format_path

_CODE_BY_ERROR_TYPE: Final = {
    "missing": ProblemCode.MISSING,
    "extra_forbidden": ProblemCode.UNEXPECTED_FIELD,
    "literal_error": ProblemCode.UNSUPPORTED_VALUE,
    "greater_than": ProblemCode.OUT_OF_RANGE,
    "greater_than_equal": ProblemCode.OUT_OF_RANGE,
    "finite_number": ProblemCode.NOT_FINITE,
    "too_short": ProblemCode.TOO_SHORT,
    "string_too_short": ProblemCode.TOO_SHORT,
}

# The models that reject extra fields, keyed by the name of the field that holds them.
_CLOSED_MODEL_BY_PARENT: Final[dict[str, type[BaseModel]]] = {
    "": ResultFile,
    "config": CaseConfig,
    "optimizer_step": OptimizerStep,
}


def parse_structure(data: object) -> tuple[ResultFile | None, list[Problem]]:
    """Validate ``data`` (parsed JSON) against :class:`ResultFile`.

    Returns the model and no problems, or ``None`` and one problem per structural error.
    """
    try:
        return ResultFile.model_validate(data), []
    except ValidationError as error:
        return None, [_to_problem(details) for details in error.errors(include_url=False)]


def _to_problem(details: ErrorDetails) -> Problem:
    error_type = details["type"]
    location = details["loc"]
    code = _CODE_BY_ERROR_TYPE.get(error_type)
    if code is None:
        is_type_error = error_type.endswith(("_type", "_parsing"))
        code = ProblemCode.WRONG_TYPE if is_type_error else ProblemCode.INVALID_VALUE
    return Problem(code, format_path(location), _message(details, code))


def _message(details: ErrorDetails, code: ProblemCode) -> str:
    location = details["loc"]
    found: Any = details["input"]
    if code is ProblemCode.MISSING:
        return "expected this required field, found it missing"
    if code is ProblemCode.UNEXPECTED_FIELD:
        parent = next((part for part in reversed(location[:-1]) if isinstance(part, str)), "")
        allowed = ", ".join(_CLOSED_MODEL_BY_PARENT[parent].model_fields)
        place = f"in {parent}" if parent else "at the top level"
        return f"expected only the fields {allowed} {place}, found an unexpected field"
    if details["type"] in ("model_type", "dict_type"):
        return f"expected a JSON object, found {describe_value(found)}"
    if details["type"] == "list_type":
        return f"expected a JSON array, found {describe_value(found)}"
    if code is ProblemCode.TOO_SHORT:
        minimum = details.get("ctx", {}).get("min_length", 1)
        unit = "character" if details["type"] == "string_too_short" else "item"
        plural = "" if minimum == 1 else "s"
        return f"expected at least {minimum} {unit}{plural}, found {len(found)}"
    expected = details["msg"].removeprefix("Input should be ")
    if code is ProblemCode.OUT_OF_RANGE:
        expected = f"a number {expected}"
    return f"expected {expected}, found {describe_value(found)}"
