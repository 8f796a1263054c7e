"""Reading a result file from disk, refusing anything that is not a JSON text of sane size."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Final

MAX_FILE_BYTES: Final = 64 * 1024 * 1024
"""Largest result file read (64 MiB); real files are a few kilobytes."""


class ResultFileReadError(ValueError):
    """A file could not be read as JSON; the message is one line and names the file."""


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """Parse a result file's JSON text.

    Args:
        path: a regular file of UTF-8 JSON text, at most :data:`MAX_FILE_BYTES` long.

    Returns:
        The parsed JSON value (not yet validated).

    Raises:
        ResultFileReadError: the file is missing, a directory or not a regular file,
            unreadable, empty, too large, binary, not UTF-8, malformed JSON, or repeats a key
            in an object.
    """
    file_path = Path(path)
    try:
        status = file_path.stat()
    except FileNotFoundError:
        raise ResultFileReadError(f"{file_path}: no such file") from None
    except OSError as error:
        raise ResultFileReadError(f"{file_path}: cannot read: {error.strerror}") from None
    if stat.S_ISDIR(status.st_mode):
        raise ResultFileReadError(f"{file_path}: is a directory, expected a JSON file")
    if not stat.S_ISREG(status.st_mode):
        raise ResultFileReadError(f"{file_path}: is not a regular file, expected a JSON file")
    if status.st_size > MAX_FILE_BYTES:
        raise ResultFileReadError(
            f"{file_path}: is {status.st_size} bytes, larger than the limit of "
            f"{MAX_FILE_BYTES} bytes (64 MiB)"
        )
    try:
        content = file_path.read_bytes()
    except OSError as error:
        raise ResultFileReadError(f"{file_path}: cannot read: {error.strerror}") from None
    return parse_json_bytes(content, str(file_path))


def parse_json_bytes(content: bytes, name: str) -> Any:
    """Decode UTF-8 JSON text; ``name`` labels the one-line :class:`ResultFileReadError`."""
    if b"\x00" in content:
        raise ResultFileReadError(f"{name}: is a binary file (contains NUL bytes), expected JSON")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultFileReadError(
            f"{name}: is not UTF-8 text (byte 0x{content[error.start]:02x} at offset {error.start})"
        ) from None
    if not text.strip():
        raise ResultFileReadError(f"{name}: is empty, expected a JSON object")
    try:
        return json.loads(text, object_pairs_hook=_object_without_repeated_keys)
    except json.JSONDecodeError as error:
        raise ResultFileReadError(
            f"{name}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    except _RepeatedKeyError as error:
        raise ResultFileReadError(f"{name}: malformed JSON: {error}") from None


class _RepeatedKeyError(ValueError):
    """An object of the JSON text names the same key twice."""


def _object_without_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _RepeatedKeyError(f"key {key!r} repeated in one object")
        result[key] = value
    return result
