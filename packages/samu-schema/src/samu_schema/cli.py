"""The ``samu-schema`` command: validate result files, print the JSON Schema.

Exit status of ``validate``: 0 when every file is valid, 1 when a file is invalid, 2 when a
file cannot be read as JSON (missing, a directory, empty, binary, not UTF-8, too large,
malformed); 2 also for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, Final

from samu_schema.json_schema import json_schema, render_json_schema
from samu_schema.problems import ValidationReport
from samu_schema.reading import MAX_FILE_BYTES, ResultFileReadError
from samu_schema.validation import validate

EXIT_VALID: Final = 0
EXIT_INVALID: Final = 1
EXIT_UNREADABLE: Final = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``samu-schema`` with ``argv`` (default: ``sys.argv[1:]``)."""
    arguments = _parser().parse_args(argv)
    if arguments.command == "schema":
        sys.stdout.write(render_json_schema(json_schema()))
        return EXIT_VALID
    return _validate_files(arguments.files, as_json=arguments.json)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samu-schema", description="Validate samu benchmark result files."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    validate_command = commands.add_parser(
        "validate",
        help="check result files against the schema and the timing protocol's rules",
        description=(
            "Check result files. Prints one line per problem, 'FILE: PATH: message', or "
            "'FILE: ok'. Exit status: 0 all valid, 1 some file invalid, 2 some file "
            f"unreadable (missing, directory, empty, binary, not UTF-8, over {MAX_FILE_BYTES} "
            "bytes, malformed JSON)."
        ),
    )
    validate_command.add_argument("files", nargs="+", metavar="FILE", help="result file (JSON)")
    validate_command.add_argument(
        "--json", action="store_true", help="print one JSON document with every file's problems"
    )
    commands.add_parser("schema", help="print the JSON Schema (Draft 2020-12) of result files")
    return parser


def _validate_files(files: Sequence[str], *, as_json: bool) -> int:
    exit_status = EXIT_VALID
    outcomes: list[dict[str, Any]] = []
    for file in files:
        try:
            report = validate(file)
        except ResultFileReadError as error:
            exit_status = EXIT_UNREADABLE
            outcomes.append({"file": file, "ok": False, "error": str(error), "problems": []})
            if not as_json:
                print(f"samu-schema: error: {error}", file=sys.stderr)
            continue
        if not report.ok and exit_status == EXIT_VALID:
            exit_status = EXIT_INVALID
        outcomes.append(_outcome(file, report))
        if not as_json:
            _print_report(file, report)
    if as_json:
        print(json.dumps({"ok": exit_status == EXIT_VALID, "files": outcomes}, indent=2))
    return exit_status


def _outcome(file: str, report: ValidationReport) -> dict[str, Any]:
    return {
        "file": file,
        "ok": report.ok,
        "error": None,
        "problems": [problem.to_json() for problem in report.problems],
    }


def _print_report(file: str, report: ValidationReport) -> None:
    if report.ok:
        print(f"{file}: ok")
    for problem in report.problems:
        print(f"{file}: {problem.path or '(file)'}: {problem.message}")
