"""Run plans from a TOML file (`samu-bench run --config FILE`).

Format (every key optional except `cases` and a case's `name`)::

    samples = 10          # timed samples per row
    warmup = 3            # untimed steps per row, at least 2
    seed = 0

    [[cases]]
    name = "state2048_short"          # a built-in case: sizes come from the table

    [[cases]]
    name = "wide_short"               # a new name: all five sizes are required
    batch = 2
    length = 4096
    width = 4096
    rnn_width = 4096
    depth = 1
    rows = [
        "rglru:fused_grouped_prefix32_hierarchical_chunk16",
        { architecture = "samu", backend = "reference", controller = "reference", compile = true },
        # replayed from torch.compile's CUDA graphs (needs compile = true):
        { architecture = "rglru", backend = "reference", compile = true, cuda_graphs = true },
        # the whole step captured as one CUDA graph (compiled or not):
        { architecture = "rglru", backend = "reference", compile = true, step_graph = true },
    ]

Rows default to the case's default rows (`catalog.default_rows`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samu_bench.catalog import builtin_cases, default_rows, make_row, parse_row
from samu_bench.errors import BenchError, first_line
from samu_bench.plan import CasePlan, CaseSpec, Row

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SIZE_KEYS = ("batch", "length", "width", "rnn_width", "depth")
_TOP_KEYS = frozenset({"samples", "warmup", "seed", "cases"})
_CASE_KEYS = frozenset({"name", "rows", *SIZE_KEYS})
_ROW_KEYS = frozenset(
    {"architecture", "backend", "controller", "compile", "cuda_graphs", "step_graph"}
)


@dataclass(frozen=True)
class FileConfig:
    """What a config file asks for: cases with rows, and optional sampling settings."""

    cases: tuple[CasePlan, ...]
    samples: int | None = None
    warmup: int | None = None
    seed: int | None = None


def _refuse_unknown(where: str, table: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise BenchError(
            f"{where}: unknown key(s) {', '.join(unknown)}; expected some of "
            f"{', '.join(sorted(allowed))}"
        )


def _integer(where: str, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BenchError(f"{where}: {key} must be an integer, got {value!r}")
    return value


def _row(where: str, entry: object) -> Row:
    if isinstance(entry, str):
        return parse_row(entry)
    if not isinstance(entry, dict):
        raise BenchError(f"{where}: a row is a string or a table, got {entry!r}")
    _refuse_unknown(where, entry, _ROW_KEYS)
    for key in ("architecture", "backend"):
        if not isinstance(entry.get(key), str):
            raise BenchError(f"{where}: {key} must be a string")
    controller = entry.get("controller")
    if controller is not None and not isinstance(controller, str):
        raise BenchError(f"{where}: controller must be a string (omit it for none)")
    flags = {}
    for key in ("compile", "cuda_graphs", "step_graph"):
        flags[key] = entry.get(key, False)
        if not isinstance(flags[key], bool):
            raise BenchError(f"{where}: {key} must be true or false, got {flags[key]!r}")
    if flags["cuda_graphs"] and not flags["compile"]:
        raise BenchError(f"{where}: cuda_graphs = true needs compile = true")
    if flags["cuda_graphs"] and flags["step_graph"]:
        raise BenchError(f"{where}: cuda_graphs and step_graph exclude each other; choose one")
    return make_row(
        entry["architecture"],
        entry["backend"],
        controller,
        compiled=flags["compile"],
        cuda_graphs=flags["cuda_graphs"],
        step_graph=flags["step_graph"],
    )


def _case(where: str, table: object, on_cuda: bool) -> CasePlan:
    if not isinstance(table, dict):
        raise BenchError(f"{where}: expected a table")
    _refuse_unknown(where, table, _CASE_KEYS)
    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise BenchError(f"{where}: name must be a non-empty string")
    sizes = {key: _integer(where, key, table[key]) for key in SIZE_KEYS if key in table}
    builtins = builtin_cases()
    if name in builtins:
        if sizes:
            raise BenchError(
                f"{where}: {name!r} is a built-in case; give the custom sizes a new name"
            )
        case = builtins[name]
    else:
        missing = [key for key in SIZE_KEYS if key not in sizes]
        if missing:
            raise BenchError(f"{where}: custom case {name!r} needs {', '.join(missing)}")
        case = CaseSpec(name=name, **sizes)
    rows_entry = table.get("rows")
    if rows_entry is None:
        rows = default_rows(name, on_cuda=on_cuda)
    elif isinstance(rows_entry, list) and rows_entry:
        rows = tuple(
            _row(f"{where}.rows[{index}]", entry) for index, entry in enumerate(rows_entry)
        )
    else:
        raise BenchError(f"{where}: rows must be a non-empty list")
    return CasePlan(case, rows)


def parse_config(document: dict[str, Any], *, on_cuda: bool, source: str = "config") -> FileConfig:
    """Turn a parsed TOML document into a `FileConfig` (BenchError naming the bad key)."""
    _refuse_unknown(source, document, _TOP_KEYS)
    entries = document.get("cases")
    if not isinstance(entries, list) or not entries:
        raise BenchError(f"{source}: expected at least one [[cases]] table")
    cases = tuple(
        _case(f"{source}: cases[{index}]", table, on_cuda) for index, table in enumerate(entries)
    )
    names = [plan.case.name for plan in cases]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise BenchError(f"{source}: case name(s) repeated: {', '.join(repeated)}")
    settings = {
        key: _integer(source, key, document[key])
        for key in ("samples", "warmup", "seed")
        if key in document
    }
    return FileConfig(cases=cases, **settings)


def load_config(path: Path, *, on_cuda: bool) -> FileConfig:
    """Read and parse a TOML config file (BenchError when unreadable or invalid)."""
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError as error:
        raise BenchError(f"{path}: no such config file") from error
    except IsADirectoryError as error:
        raise BenchError(f"{path}: is a directory, expected a TOML file") from error
    except OSError as error:
        raise BenchError(f"{path}: cannot read: {error.strerror or error}") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BenchError(f"{path}: invalid TOML: {first_line(str(error))}") from error
    return parse_config(document, on_cuda=on_cuda, source=str(path))
