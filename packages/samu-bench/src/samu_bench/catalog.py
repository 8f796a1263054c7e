"""The built-in cases, their default rows, and the `arch:backend[:controller]` row syntax."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping

import samu_kernels
from samu_bench.errors import BenchError
from samu_bench.peers import RECURRENTGEMMA, peer_row
from samu_bench.plan import CasePlan, CaseSpec, Row
from samu_kernels.backends import PEER_PREFIX
from samu_modules import REFERENCE_CASES

REFERENCE_TOKENS: Mapping[str, tuple[int, int]] = types.MappingProxyType(
    {"state2048_short": (4, 2048), "state2560_medium": (1, 8192), "400m_block_long": (1, 32768)}
)
"""(batch, length) of each reference case; its widths and depth are samu_modules'."""

CPU_SMOKE = CaseSpec(name="cpu_smoke", batch=1, length=64, width=64, rnn_width=64, depth=1)
"""The case a machine without CUDA runs: tiny sizes, reference backends, not a measurement."""

_HIERARCHICAL_SAMU_ROW: Mapping[str, bool] = types.MappingProxyType(
    {"state2048_short": False, "state2560_medium": True, "400m_block_long": True}
)
"""Whether the reference file's samu row of a case is the hierarchical backend."""

CPU_SMOKE_ROWS: tuple[Row, ...] = (
    Row("rglru", "reference", None),
    Row("samu", "reference", "reference"),
)


def builtin_cases() -> dict[str, CaseSpec]:
    """Every built-in case by name: the three reference cases, then `cpu_smoke`."""
    cases = {
        name: CaseSpec(
            name=name,
            batch=REFERENCE_TOKENS[name][0],
            length=REFERENCE_TOKENS[name][1],
            width=shape.width,
            rnn_width=shape.rnn_width,
            depth=shape.depth,
        )
        for name, shape in REFERENCE_CASES.items()
    }
    cases[CPU_SMOKE.name] = CPU_SMOKE
    return cases


def builtin_case(name: str) -> CaseSpec:
    """The built-in case called `name`; BenchError listing the names otherwise."""
    cases = builtin_cases()
    if name not in cases:
        raise BenchError(f"unknown case {name!r}; built-in cases are {', '.join(cases)}")
    return cases[name]


def reference_rows(case_name: str) -> tuple[Row, ...]:
    """The reference file's rows of reference case `case_name`: rglru and one samu row."""
    hierarchical = _HIERARCHICAL_SAMU_ROW[case_name]
    rows = []
    for architecture, backend, controller in samu_kernels.REFERENCE_FILE_ROWS:
        if architecture == "samu" and (
            samu_kernels.parse_backend(backend).hierarchical != hierarchical
        ):
            continue
        rows.append(Row(architecture, backend, controller))
    return tuple(rows)


def default_rows(case_name: str, *, on_cuda: bool) -> tuple[Row, ...]:
    """Rows of a case when none are given.

    Reference cases get the reference file's rows, `cpu_smoke` its reference-backend rows,
    and any other case the default backend of each architecture (`reference` off CUDA).
    """
    if case_name in _HIERARCHICAL_SAMU_ROW:
        return reference_rows(case_name)
    if case_name == CPU_SMOKE.name or not on_cuda:
        return CPU_SMOKE_ROWS
    return (
        make_row("rglru", samu_kernels.DEFAULT_BACKENDS["rglru"], None),
        make_row("samu", samu_kernels.DEFAULT_BACKENDS["samu"], samu_kernels.DEFAULT_CONTROLLER),
    )


def default_plan(case_name: str, *, on_cuda: bool) -> CasePlan:
    """The built-in case `case_name` with its default rows."""
    return CasePlan(builtin_case(case_name), default_rows(case_name, on_cuda=on_cuda))


def make_row(
    architecture: str,
    backend: str,
    controller: str | None,
    *,
    compiled: bool = False,
    cuda_graphs: bool = False,
    step_graph: bool = False,
) -> Row:
    """A checked row (BenchError if unfit; `cuda_graphs` needs `compiled` and excludes
    `step_graph`).

    `peer:recurrentgemma` is recurrentgemma's own block (rglru, no controller); any other
    backend is checked with `samu_kernels.check_backend` and runs the samu-modules block
    (a scan peer such as `peer:fla_chunk_hgrn` must be registered before the run).
    """
    if backend == RECURRENTGEMMA.backend:
        if (architecture, controller) != ("rglru", None):
            raise BenchError(
                f"row {architecture}:{backend}:{controller}: {backend} is an rglru block "
                "without a controller"
            )
        return dataclasses.replace(
            peer_row(backend, compiled=compiled), cuda_graphs=cuda_graphs, step_graph=step_graph
        )
    try:
        samu_kernels.check_backend(architecture, backend, controller)
    except ValueError as error:
        raise BenchError(f"row {architecture}:{backend}:{controller}: {error}") from error
    return Row(
        architecture,
        backend,
        controller,
        compiled=compiled,
        cuda_graphs=cuda_graphs,
        step_graph=step_graph,
    )


def parse_row(text: str, *, compiled: bool = False) -> Row:
    """Parse `architecture:backend[:controller]` into a checked row.

    Without a controller, samu takes `samu_kernels.DEFAULT_CONTROLLER` and rglru none;
    `none`/`null` spell an explicit null controller. A peer backend keeps its colon:
    `rglru:peer:fla_chunk_hgrn`, `samu:peer:accelerated_scan:reference`.
    """
    parts = text.split(":")
    if len(parts) > 2 and parts[1] == PEER_PREFIX.rstrip(":"):
        parts[1:3] = [f"{parts[1]}:{parts[2]}"]
    if len(parts) not in (2, 3) or not all(parts):
        raise BenchError(f"row {text!r} must look like architecture:backend[:controller]")
    architecture, backend = parts[0], parts[1]
    if len(parts) == 3:
        controller: str | None = None if parts[2].lower() in ("none", "null") else parts[2]
    elif architecture == "samu":
        controller = samu_kernels.DEFAULT_CONTROLLER
    else:
        controller = None
    return make_row(architecture, backend, controller, compiled=compiled)


def needs_cuda(row: Row) -> bool:
    """Whether a row runs only on a CUDA GPU: rows that replay CUDA graphs, and every
    backend but `reference` and recurrentgemma's block."""
    return row.replays_graphs or row.backend not in ("reference", RECURRENTGEMMA.backend)


def is_reference_case(name: str) -> bool:
    """Whether `name` is one of the three reference cases (GPU-sized)."""
    return name in _HIERARCHICAL_SAMU_ROW
