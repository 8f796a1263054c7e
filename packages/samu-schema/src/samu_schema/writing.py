"""Writing a result file: validated first, never half-written, never clobbered by accident."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samu_schema.models import ResultFile
from samu_schema.problems import ValidationReport
from samu_schema.validation import to_json_data, validate_json_data


class InvalidResultError(ValueError):
    """A result refused by :func:`write_result_file`; ``report`` lists the problems."""

    def __init__(self, report: ValidationReport) -> None:
        self.report = report
        lines = [f"{problem.path or '(file)'}: {problem.message}" for problem in report.problems]
        super().__init__(
            f"refusing to write an invalid result file ({len(lines)} problem"
            f"{'' if len(lines) == 1 else 's'}):\n  " + "\n  ".join(lines)
        )


def write_result_file(
    data: Mapping[str, Any] | ResultFile,
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
) -> Path:
    """Validate ``data`` and write it as 2-space indented JSON to ``path``, atomically.

    The text goes to a temporary file in the target's directory, is flushed to disk, and
    then takes the target's name in one step, so a reader never sees a partial file.

    Args:
        data: the result as a mapping (as :func:`samu_schema.validate` takes it) or a
            :class:`ResultFile`.
        path: where to write; its directory must exist.
        overwrite: replace an existing file at ``path``; when false an existing file is
            never touched.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        InvalidResultError: ``data`` does not validate (nothing is written).
        FileExistsError: ``path`` exists and ``overwrite`` is false.
        TypeError: ``data`` is neither a mapping nor a ResultFile.
    """
    if not isinstance(data, (Mapping, ResultFile)):
        raise TypeError(f"data must be a mapping or a ResultFile, found {type(data).__name__}")
    json_data = to_json_data(data)
    report = validate_json_data(json_data)
    if not report.ok:
        raise InvalidResultError(report)
    target = Path(path)
    if not overwrite and target.exists():
        raise FileExistsError(f"{target}: already exists; pass overwrite=True to replace it")
    text = json.dumps(json_data, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
    descriptor, temporary_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as temporary:
            temporary.write(text)
            temporary.flush()
            os.fsync(temporary.fileno())
        os.chmod(temporary_name, 0o644)  # mkstemp creates 0600; results are shared
        if overwrite:
            os.replace(temporary_name, target)
        else:
            # A hard link fails if the target appeared meanwhile: no check-then-write race.
            os.link(temporary_name, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary_name)
    return target
