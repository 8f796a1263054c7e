"""Built-in cases, default rows and the row syntax."""

from __future__ import annotations

from typing import Any

import pytest

import samu_kernels
from samu_bench import (
    CPU_SMOKE,
    BenchError,
    CaseSpec,
    builtin_case,
    builtin_cases,
    default_rows,
    parse_row,
)
from samu_bench.catalog import make_row, needs_cuda
from samu_modules import REFERENCE_CASES


def test_reference_cases_match_the_reference_file(reference_document: dict[str, Any]) -> None:
    for case in reference_document["cases"]:
        spec = builtin_case(case["case"])
        config = case["config"]
        assert (spec.batch, spec.length) == (case["batch"], case["length"])
        assert (spec.width, spec.rnn_width, spec.depth) == tuple(REFERENCE_CASES[spec.name])
        assert (spec.width, spec.rnn_width, spec.depth) == (
            config["width"],
            config["rnn_width"],
            config["depth"],
        )


def test_default_rows_are_the_reference_files(reference_document: dict[str, Any]) -> None:
    for case in reference_document["cases"]:
        expected = [
            (row["architecture"], row["backend"], row["controller"]) for row in case["rows"]
        ]
        for on_cuda in (True, False):
            assert [row.key for row in default_rows(case["case"], on_cuda=on_cuda)] == expected


def test_cpu_smoke_case_and_rows() -> None:
    assert CaseSpec("cpu_smoke", batch=1, length=64, width=64, rnn_width=64, depth=1) == CPU_SMOKE
    rows = default_rows("cpu_smoke", on_cuda=False)
    assert [row.key for row in rows] == [
        ("rglru", "reference", None),
        ("samu", "reference", "reference"),
    ]
    assert list(builtin_cases()) == [*REFERENCE_CASES, "cpu_smoke"]


def test_custom_cases_default_to_the_default_backends() -> None:
    on_gpu = [row.key for row in default_rows("my_case", on_cuda=True)]
    assert on_gpu == [
        ("rglru", samu_kernels.DEFAULT_BACKENDS["rglru"], None),
        ("samu", samu_kernels.DEFAULT_BACKENDS["samu"], samu_kernels.DEFAULT_CONTROLLER),
    ]
    assert all(row.backend == "reference" for row in default_rows("my_case", on_cuda=False))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("rglru:reference", ("rglru", "reference", None)),
        ("rglru:reference:none", ("rglru", "reference", None)),
        ("samu:reference", ("samu", "reference", samu_kernels.DEFAULT_CONTROLLER)),
        ("samu:reference:reference", ("samu", "reference", "reference")),
        (
            "samu:fused_output_fused_write_shared_sfu_chunk32:fp32_fused_coords",
            ("samu", "fused_output_fused_write_shared_sfu_chunk32", "fp32_fused_coords"),
        ),
    ],
)
def test_parse_row(text: str, key: tuple[str, str, str | None]) -> None:
    row = parse_row(text)
    assert row.key == key
    assert not row.compiled
    assert parse_row(text, compiled=True).compiled


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rglru", "must look like architecture:backend"),
        ("rglru::", "must look like architecture:backend"),
        ("a:b:c:d", "must look like architecture:backend"),
        ("mamba:reference", "row mamba:reference"),
        ("rglru:chunk7", "row rglru:chunk7"),
        ("rglru:reference:reference", "row rglru:reference:reference"),
    ],
)
def test_parse_row_refuses_bad_rows(text: str, message: str) -> None:
    with pytest.raises(BenchError, match=message):
        parse_row(text)


def test_unknown_case_lists_the_built_in_ones() -> None:
    with pytest.raises(BenchError, match="built-in cases are state2048_short"):
        builtin_case("nope")


@pytest.mark.parametrize("size", ["batch", "length", "width", "rnn_width", "depth"])
def test_case_sizes_must_be_positive(size: str) -> None:
    sizes = {"batch": 1, "length": 1, "width": 1, "rnn_width": 1, "depth": 1, size: 0}
    with pytest.raises(BenchError, match=f"{size} must be a positive integer"):
        CaseSpec(name="bad", **sizes)


def test_cuda_graph_rows_are_compiled_rows() -> None:
    row = make_row("rglru", "reference", None, compiled=True, cuda_graphs=True)
    assert row.recorded_backend == "reference+compile+cudagraphs"
    assert needs_cuda(row)
    with pytest.raises(BenchError, match="must be compiled too"):
        make_row("rglru", "reference", None, cuda_graphs=True)
    peer = make_row("rglru", "peer:recurrentgemma", None, compiled=True, cuda_graphs=True)
    assert peer.recorded_backend == "peer:recurrentgemma+compile+cudagraphs"


def test_step_graph_rows() -> None:
    compiled = make_row("rglru", "reference", None, compiled=True, step_graph=True)
    assert compiled.recorded_backend == "reference+compile+stepgraph"
    eager = make_row("rglru", "reference", None, step_graph=True)
    assert eager.recorded_backend == "reference+stepgraph"
    assert needs_cuda(eager)
    with pytest.raises(BenchError, match="exclude each other"):
        make_row("rglru", "reference", None, compiled=True, cuda_graphs=True, step_graph=True)
