"""Regenerate the shipped JSON Schema from the models: ``python -m samu_schema.export``.

Run it after changing :mod:`samu_schema.models`; the freshness test fails until you do.
``--check`` only reports (exit 1) when the shipped file is out of date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from samu_schema.json_schema import SCHEMA_RESOURCE, build_json_schema, render_json_schema

SCHEMA_PATH = Path(__file__).with_name(SCHEMA_RESOURCE)


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the shipped schema file; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m samu_schema.export",
        description="Regenerate samu_schema/result_file.schema.json from the pydantic models.",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the shipped file is out of date"
    )
    arguments = parser.parse_args(argv)
    text = render_json_schema(build_json_schema())
    current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else None
    if arguments.check:
        if current != text:
            print(f"{SCHEMA_PATH} is out of date: run python -m samu_schema.export")
            return 1
        print(f"{SCHEMA_PATH} is up to date")
        return 0
    if current != text:
        SCHEMA_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_PATH}")
    else:
        print(f"{SCHEMA_PATH} is already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
