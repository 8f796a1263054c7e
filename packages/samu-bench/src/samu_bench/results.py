"""Result-file entries, the file as a whole, and writing/reading it through samu-schema."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import samu_schema
from samu_bench.errors import BenchError
from samu_bench.instruments import MemoryReading
from samu_bench.plan import CaseSpec, ProtocolSettings, Row, SkippedRow

PROTOCOL: Mapping[str, Any] = {
    "scope": "complete recurrent block forward, input/parameter backward and optimizer update",
    "optimizer": "torch.optim.AdamW(fused=True), states initialized before timing",
    "dtype": "BF16 autocast, FP32 parameters and recurrent carry",
    "order": "AB/BA",
    "compile_and_optimizer_state_initialization_excluded": True,
}
"""The protocol block, worded as in the reference file."""


def row_entry(
    row: Row,
    samples_ms: Sequence[float],
    parameters: int,
    baseline: MemoryReading | None,
    peak: MemoryReading | None,
    requested: ProtocolSettings | None = None,
) -> dict[str, Any]:
    """A row of the file: statistics from `samu_schema.summarize`, memory, parameters.

    `baseline`/`peak` None (no CUDA) gives null memory fields; `compiled`, `cuda_graphs` and
    `step_graph` are extras (a compiled row's backend is recorded as `<backend>+compile`,
    with `+cudagraphs` after it when replayed from torch.compile's CUDA graphs; a row whose
    whole step is one graph ends in `+stepgraph`). A row with a sample
    limit also records, from the run's `requested` settings, `samples_requested`,
    `warmup_steps` and `sample_limit_reason`.
    """
    entry: dict[str, Any] = {
        "architecture": row.architecture,
        "backend": row.recorded_backend,
        "controller": row.controller,
        "compiled": row.compiled,
        "cuda_graphs": row.cuda_graphs,
        "step_graph": row.step_graph,
        "optimizer_step": samu_schema.summarize(samples_ms).model_dump(mode="json"),
    }
    for kind in ("allocated", "reserved"):
        base = None if baseline is None else getattr(baseline, kind)
        top = None if peak is None else getattr(peak, kind)
        entry[f"baseline_{kind}_bytes"] = base
        entry[f"peak_{kind}_bytes"] = top
        entry[f"peak_{kind}_delta_bytes"] = None if base is None or top is None else top - base
    entry["parameters"] = parameters
    if row.sample_limit is not None and requested is not None:
        entry.update(row.sample_limit.row_extras(requested))
    return entry


def case_entry(
    case: CaseSpec, rows: Sequence[Mapping[str, Any]], skipped: Sequence[SkippedRow] = ()
) -> dict[str, Any]:
    """A case of the file: name, batch, length, config, its rows and any `skipped_rows`."""
    entry: dict[str, Any] = {
        "case": case.name,
        "batch": case.batch,
        "length": case.length,
        "config": {"width": case.width, "rnn_width": case.rnn_width, "depth": case.depth},
        "rows": list(rows),
    }
    if skipped:
        entry["skipped_rows"] = [row.entry() for row in skipped]
    return entry


def result_document(
    environment: Mapping[str, Any],
    settings: ProtocolSettings,
    timer: str,
    cases: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The whole file; the protocol block also records warm-up, samples, seed and timer."""
    protocol = {
        **PROTOCOL,
        "warmup_steps": settings.warmup,
        "samples_per_row": settings.samples,
        "seed": settings.seed,
        "timer": timer,
    }
    return {
        "schema_version": samu_schema.SCHEMA_VERSION,
        "protocol": protocol,
        "environment": dict(environment),
        "cases": list(cases),
    }


def _problems_line(problems: Sequence[samu_schema.Problem], limit: int = 3) -> str:
    shown = "; ".join(
        f"{problem.path or '(file)'}: {problem.message}" for problem in problems[:limit]
    )
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return shown + more


class ResultWriter:
    """Writes the file again after every finished case, atomically and validated first.

    An interrupted run thus leaves a valid file with the cases finished so far. The first
    write refuses an existing file unless `overwrite`; later writes replace our own file.
    `cases` and `document` hold what was last written (`document` None before that).
    """

    def __init__(
        self,
        path: Path,
        environment: Mapping[str, Any],
        settings: ProtocolSettings,
        timer: str,
        *,
        overwrite: bool = False,
    ) -> None:
        self.path = path
        self._environment = dict(environment)
        self._settings = settings
        self._timer = timer
        self._overwrite = overwrite
        self.cases: list[dict[str, Any]] = []
        self.document: dict[str, Any] | None = None

    def add_case(self, case: Mapping[str, Any]) -> None:
        """Append a finished case and rewrite the file (BenchError if invalid or refused)."""
        document = result_document(
            self._environment, self._settings, self._timer, [*self.cases, dict(case)]
        )
        try:
            samu_schema.write_result_file(document, self.path, overwrite=self._overwrite)
        except samu_schema.InvalidResultError as error:
            raise BenchError(
                "the run produced an invalid result, not written: "
                + _problems_line(error.report.problems)
            ) from error
        except FileExistsError as error:
            raise BenchError(f"{self.path} exists; pass --force to overwrite it") from error
        except OSError as error:
            raise BenchError(f"cannot write {self.path}: {error.strerror or error}") from error
        self.cases.append(dict(case))
        self.document = document
        self._overwrite = True


def load_result_file(path: Path) -> dict[str, Any]:
    """Read and validate a result file; BenchError saying why when it cannot be used."""
    try:
        report = samu_schema.validate(path)
    except samu_schema.ResultFileReadError as error:
        raise BenchError(str(error)) from error
    if not report.ok:
        raise BenchError(
            f"{path} is not a valid result file ({len(report.problems)} problems): "
            + _problems_line(report.problems)
        )
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document
