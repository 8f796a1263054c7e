"""The JSON Schema (Draft 2020-12) of a result file: generated from the models, shipped as JSON."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Final

from samu_schema.models import ResultFile

SCHEMA_RESOURCE: Final = "result_file.schema.json"
"""Name of the shipped schema inside the ``samu_schema`` package."""
DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


def build_json_schema() -> dict[str, Any]:
    """Generate the JSON Schema from :class:`ResultFile` (what the shipped file must equal).

    It describes the structure only; the cross-field rules are in ``docs/schema.md`` and in
    :func:`samu_schema.validate`.
    """
    return {"$schema": DIALECT, **ResultFile.model_json_schema(mode="validation")}


def render_json_schema(schema: dict[str, Any]) -> str:
    """The schema as the shipped file's text: 2-space indented JSON with a final newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def json_schema() -> dict[str, Any]:
    """The shipped JSON Schema of schema version 1, loaded from the package's data file."""
    text = resources.files("samu_schema").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
