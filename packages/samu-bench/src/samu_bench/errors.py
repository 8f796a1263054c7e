"""The one error type the CLI turns into a one-line message."""

from __future__ import annotations


class BenchError(Exception):
    """A user-facing failure: bad arguments, an unreadable or invalid file, a failed run.

    The message is a single line that says what went wrong and, where it helps, what was
    expected; the CLI prints it without a traceback.
    """


def first_line(text: str) -> str:
    """The first non-empty line of `text` (error messages of torch can span many lines)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
