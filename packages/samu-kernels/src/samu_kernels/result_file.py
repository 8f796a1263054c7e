"""The ``--out`` / ``--force`` options of the samu_kernels commands, and their check.

Every command that writes a JSON result file checks it before the GPU is touched, so that a
run of minutes never ends unable to write, and never overwrites a file without ``--force``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_result_file_options", "refuse_unwritable_result_file"]


def add_result_file_options(
    parser: argparse.ArgumentParser, *, required: bool = False, default: Path | None = None
) -> None:
    """Add ``--out PATH`` (the JSON file to write) and ``--force`` (overwrite it)."""
    parser.add_argument(
        "--out", type=Path, required=required, default=default, help="JSON file to write"
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out")


def refuse_unwritable_result_file(
    parser: argparse.ArgumentParser, out: Path | None, *, force: bool
) -> None:
    """Exit through ``parser.error`` (status 2) where ``out`` exists and ``force`` is not
    set, or its folder does not exist; None (no file asked for) passes."""
    if out is None:
        return
    if out.exists() and not force:
        parser.error(f"--out {out} exists; pass --force to overwrite it")
    if not out.parent.is_dir():
        parser.error(f"--out {out}: folder {out.parent} does not exist")
