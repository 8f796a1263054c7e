"""TOML run configurations."""

from __future__ import annotations

from pathlib import Path

import pytest

from samu_bench import BenchError, CaseSpec, load_config

VALID = """
samples = 4
warmup = 2
seed = 7

[[cases]]
name = "cpu_smoke"

[[cases]]
name = "wide"
batch = 2
length = 33
width = 48
rnn_width = 64
depth = 3
rows = [
    "rglru:reference",
    { architecture = "samu", backend = "reference", controller = "reference", compile = true },
    { architecture = "rglru", backend = "reference", compile = true, cuda_graphs = true },
    { architecture = "rglru", backend = "reference", step_graph = true },
]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bench.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_config(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID), on_cuda=False)
    assert (config.samples, config.warmup, config.seed) == (4, 2, 7)
    smoke, wide = config.cases
    assert smoke.case.name == "cpu_smoke"
    assert [row.key for row in smoke.rows] == [
        ("rglru", "reference", None),
        ("samu", "reference", "reference"),
    ]
    assert wide.case == CaseSpec("wide", batch=2, length=33, width=48, rnn_width=64, depth=3)
    assert [(row.backend, row.compiled, row.label) for row in wide.rows] == [
        ("reference", False, "rglru:reference"),
        ("reference", True, "samu:reference+compile:reference"),
        ("reference", True, "rglru:reference+compile+cudagraphs"),
        ("reference", False, "rglru:reference+stepgraph"),
    ]
    assert [row.cuda_graphs for row in wide.rows] == [False, False, True, False]
    assert [row.step_graph for row in wide.rows] == [False, False, False, True]


def test_settings_are_optional(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[[cases]]\nname = "cpu_smoke"\n'), on_cuda=False)
    assert (config.samples, config.warmup, config.seed) == (None, None, None)


CUSTOM = '[[cases]]\nname = "c"\nbatch = 1\nlength = 8\nwidth = 16\nrnn_width = 16\ndepth = 1\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("samples = 3\n", "expected at least one \\[\\[cases\\]\\] table"),
        ("cases = []\n", "expected at least one"),
        ('sample = 3\n[[cases]]\nname = "cpu_smoke"\n', "unknown key\\(s\\) sample"),
        ('[[cases]]\nname = "cpu_smoke"\nlenght = 3\n', "cases\\[0\\]: unknown key\\(s\\) lenght"),
        ("[[cases]]\nbatch = 1\n", "name must be a non-empty string"),
        ('[[cases]]\nname = "cpu_smoke"\nbatch = 2\n', "is a built-in case"),
        ('[[cases]]\nname = "c"\nbatch = 1\n', "custom case 'c' needs length, width"),
        ('[[cases]]\nname = "cpu_smoke"\n[[cases]]\nname = "cpu_smoke"\n', "repeated: cpu_smoke"),
        ('samples = "many"\n[[cases]]\nname = "cpu_smoke"\n', "samples must be an integer"),
        (CUSTOM.replace("length = 8", "length = 8.5"), "length must be an integer"),
        (CUSTOM.replace("length = 8", "length = 0"), "length must be a positive integer"),
        (CUSTOM + "rows = []\n", "rows must be a non-empty list"),
        (CUSTOM + "rows = [3]\n", "a row is a string or a table"),
        (CUSTOM + 'rows = ["rglru"]\n', "must look like architecture:backend"),
        (CUSTOM + 'rows = [{ architecture = "samu" }]\n', "backend must be a string"),
        (CUSTOM + 'rows = [{ architecture = "rglru", backend = "nope" }]\n', "row rglru:nope"),
        (
            CUSTOM + 'rows = [{ architecture = "rglru", backend = "reference", fast = 1 }]\n',
            "unknown key\\(s\\) fast",
        ),
        (
            CUSTOM + 'rows = [{ architecture = "rglru", backend = "reference", compile = 1 }]\n',
            "compile must be true or false",
        ),
        (
            CUSTOM + 'rows = [{ architecture = "rglru", backend = "x", cuda_graphs = true }]\n',
            "cuda_graphs = true needs compile = true",
        ),
        (
            CUSTOM + 'rows = [{ architecture = "rglru", backend = "x", compile = true, '
            "cuda_graphs = true, step_graph = true }]\n",
            "exclude each other",
        ),
        (
            CUSTOM + 'rows = [{ architecture = "rglru", backend = "x", step_graph = "yes" }]\n',
            "step_graph must be true or false",
        ),
        (CUSTOM + 'rows = ["rglru:reference", "rglru:reference"]\n', "given twice"),
        ("[[cases]\n", "invalid TOML"),
    ],
)
def test_invalid_configs_are_refused(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(BenchError, match=message) as info:
        load_config(write(tmp_path, text), on_cuda=False)
    assert "\n" not in str(info.value)


def test_unreadable_configs(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no such config file"):
        load_config(tmp_path / "missing.toml", on_cuda=False)
    with pytest.raises(BenchError, match="is a directory"):
        load_config(tmp_path, on_cuda=False)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(BenchError, match="invalid TOML"):
        load_config(binary, on_cuda=False)
