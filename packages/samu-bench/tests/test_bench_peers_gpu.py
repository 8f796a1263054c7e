"""`samu-bench run --peers --compile` end to end on a GPU, with the real peer libraries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import samu_schema
from samu_bench.cli import main
from samu_bench.peers import PEERS, available_peers

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_peers_eager_and_compiled(tmp_path: Path) -> None:
    """L = 64 keeps recurrentgemma's compiled row (its loop is unrolled) quick to compile."""
    installed = [backend for backend, status in available_peers().items() if status.available]
    if not installed:
        pytest.skip("no peer library is installed (samu-bench[peers])")
    out = tmp_path / "peers.json"
    args = ["run", "--case", "state2048_short", "--batch", "2", "--length", "64"]
    args += ["--width", "128", "--rnn-width", "128", "--samples", "2", "--peers", "--compile"]
    assert main([*args, "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert samu_schema.validate(document).ok
    [case] = document["cases"]
    backends = {row["backend"] for row in case["rows"]}
    for backend in installed:
        assert {backend, backend + "+compile"} <= backends
    skipped = {row["backend"] for row in case.get("skipped_rows", [])}
    assert backends | skipped >= {peer.backend for peer in PEERS}
    parameters = {row["parameters"] for row in case["rows"] if row["architecture"] == "rglru"}
    assert len(parameters) == 1, "every rglru row times the same block"
