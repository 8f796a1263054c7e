"""The shipped JSON Schema: up to date with the models, Draft 2020-12, closed where it must be."""

from __future__ import annotations

from typing import Any, get_args

from jsonschema import Draft202012Validator

from samu_schema import SCHEMA_VERSION, ResultFile, json_schema
from samu_schema.export import SCHEMA_PATH
from samu_schema.export import main as export_main
from samu_schema.json_schema import build_json_schema, render_json_schema


def test_shipped_schema_is_up_to_date_with_the_models() -> None:
    assert json_schema() == build_json_schema(), (
        "the shipped schema is stale: run `uv run --frozen python -m samu_schema.export`"
    )
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render_json_schema(build_json_schema())


def test_export_check_reports_an_up_to_date_file() -> None:
    assert export_main(["--check"]) == 0


def test_schema_declares_draft_2020_12_and_version_1() -> None:
    schema = json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["schema_version"] == {
        "const": SCHEMA_VERSION,
        "description": "Format version of this file.",
        "title": "Schema Version",
        "type": "integer",
    }
    assert get_args(ResultFile.model_fields["schema_version"].annotation) == (SCHEMA_VERSION,)


def test_extras_are_closed_exactly_where_typos_must_be_caught() -> None:
    schema = json_schema()
    definitions = schema["$defs"]
    assert schema["additionalProperties"] is False
    assert definitions["CaseConfig"]["additionalProperties"] is False
    assert definitions["OptimizerStep"]["additionalProperties"] is False
    for name in ("Protocol", "Environment", "Case", "Row"):
        assert definitions[name]["additionalProperties"] is True, name


def test_every_field_has_a_description() -> None:
    for name, definition in json_schema()["$defs"].items():
        for field, spec in definition["properties"].items():
            assert spec.get("description"), f"{name}.{field}"


def test_reference_and_cpu_smoke_files_conform_to_the_json_schema(
    reference: dict[str, Any], cpu_smoke: dict[str, Any]
) -> None:
    validator = Draft202012Validator(json_schema())
    Draft202012Validator.check_schema(json_schema())
    assert list(validator.iter_errors(reference)) == []
    assert list(validator.iter_errors(cpu_smoke)) == []


def test_json_schema_rejects_what_the_models_reject(reference: dict[str, Any]) -> None:
    validator = Draft202012Validator(json_schema())
    reference["cases"][0]["rows"][0]["optimizer_step"]["typo_ms"] = 1.0
    reference["cases"][0]["config"]["width"] = "2048"
    paths = {tuple(error.absolute_path) for error in validator.iter_errors(reference)}
    assert ("cases", 0, "rows", 0, "optimizer_step") in paths
    assert ("cases", 0, "config", "width") in paths
