"""`samu-bench run --peers` / `--compile`, the peer row syntax, and `show` of peer rows (CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

import samu_schema
from samu_bench import BenchError, cli, parse_row
from samu_bench.peers import PEERS, RECURRENTGEMMA_SAMPLE_LIMIT, PeerStatus
from samu_bench.run_command import add_peers, resolve_plan

TINY = ["--length", "9", "--width", "16", "--rnn-width", "16", "--warmup", "2"]
SCAN_PEER_MODULES = (
    "fla",
    "fla.ops",
    "fla.ops.hgrn",
    "accelerated_scan",
    "accelerated_scan.scalar",
)


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test takes the CPU path, also on a machine with a GPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def without_scan_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    """fla-core and accelerated-scan fail to import, whether installed or not."""
    for name in SCAN_PEER_MODULES:
        monkeypatch.setitem(sys.modules, name, None)


def all_available() -> dict[str, PeerStatus]:
    return {
        peer.backend: PeerStatus(peer.backend, peer.distribution, "1.0", None) for peer in PEERS
    }


@pytest.mark.usefixtures("without_scan_peers")
def test_run_with_peers_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("recurrentgemma.torch", reason="recurrentgemma[torch] is not installed")
    out = tmp_path / "peers.json"
    assert cli.main(["run", *TINY, "--samples", "4", "--peers", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    for backend in ("peer:fla_chunk_hgrn", "peer:fla_fused_recurrent_hgrn"):
        assert f"{backend} skipped: fla-core " in captured.err
    assert "peer:accelerated_scan skipped: accelerated-scan " in captured.err

    document = json.loads(out.read_text())
    assert samu_schema.validate(document).ok
    assert set(document["environment"]["peers"]) == {
        "fla-core",
        "accelerated-scan",
        "recurrentgemma",
    }
    [case] = document["cases"]
    assert [(row["architecture"], row["backend"]) for row in case["rows"]] == [
        ("rglru", "reference"),
        ("samu", "reference"),
        ("rglru", "peer:recurrentgemma"),
    ]
    peer = case["rows"][2]
    assert (peer["architecture"], peer["controller"], peer["compiled"]) == ("rglru", None, False)
    assert len(peer["optimizer_step"]["samples_ms"]) == RECURRENTGEMMA_SAMPLE_LIMIT.max_samples
    assert peer["samples_requested"] == 4
    assert peer["warmup_steps"] == 2
    assert peer["sample_limit_reason"] == RECURRENTGEMMA_SAMPLE_LIMIT.reason
    ours = [row for row in case["rows"] if row["backend"] == "reference"]
    assert [len(row["optimizer_step"]["samples_ms"]) for row in ours] == [4, 4]
    skipped = {row["backend"]: row["reason"] for row in case["skipped_rows"]}
    assert set(skipped) == {peer.backend for peer in PEERS} - {"peer:recurrentgemma"}
    assert all("install samu-bench[peers]" in reason for reason in skipped.values())
    assert "rglru:peer:recurrentgemma: 3 of 4 samples" in captured.out

    assert cli.main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "rglru:peer:recurrentgemma" in shown
    assert "rglru:peer:accelerated_scan skipped: accelerated-scan" in shown


def plans_for(arguments: list[str], *, on_cuda: bool) -> tuple[Any, ...]:
    args = cli.build_parser().parse_args(["run", *arguments])
    plans, _ = resolve_plan(args, on_cuda=on_cuda)
    extended, _ = add_peers(plans, args, Console(file=None, quiet=True), on_cuda=on_cuda)
    return extended


def test_peers_and_compile_give_eager_and_compiled_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("samu_bench.run_command.register_scan_peers", all_available)
    arguments = ["--case", "state2048_short", "--length", "1024", "--peers", "--compile"]
    [plan] = plans_for(arguments, on_cuda=True)
    backends = [row.recorded_backend for row in plan.rows]
    ours = [backend for backend in backends if not backend.startswith("peer:")]
    assert len(ours) == 4
    assert ours[2:] == [backend + "+compile" for backend in ours[:2]]
    assert [backend for backend in backends if backend.startswith("peer:")] == [
        "peer:fla_chunk_hgrn",
        "peer:fla_chunk_hgrn+compile",
        "peer:fla_fused_recurrent_hgrn",
        "peer:fla_fused_recurrent_hgrn+compile",
        "peer:accelerated_scan",
        "peer:accelerated_scan+compile",
        "peer:recurrentgemma",
    ]
    assert [row.compiled for row in plan.rows] == [b.endswith("+compile") for b in backends]
    [skipped] = plan.skipped
    assert skipped.backend == "peer:recurrentgemma+compile"
    assert "unroll" in skipped.reason


def test_without_peers_no_peer_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> dict[str, PeerStatus]:
        raise AssertionError("peers were registered without being asked for")

    monkeypatch.setattr("samu_bench.run_command.register_scan_peers", refuse)
    [plan] = plans_for(TINY, on_cuda=False)
    assert [row.backend for row in plan.rows] == ["reference", "reference"]


@pytest.mark.usefixtures("without_scan_peers")
def test_a_missing_scan_peer_row_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "none.json"
    assert cli.main(["run", *TINY, "--row", "rglru:peer:fla_chunk_hgrn", "--out", str(out)]) == 1
    error = capsys.readouterr().err
    assert "Traceback" not in error
    [line] = [line for line in error.splitlines() if line.startswith("samu-bench")]
    assert line.startswith("samu-bench: error: row backend peer:fla_chunk_hgrn: fla-core ")
    assert not out.exists()


def test_peer_row_syntax() -> None:
    recurrentgemma = parse_row("rglru:peer:recurrentgemma")
    assert recurrentgemma.key == ("rglru", "peer:recurrentgemma", None)
    assert recurrentgemma.sample_limit is RECURRENTGEMMA_SAMPLE_LIMIT
    assert parse_row("rglru:peer:recurrentgemma", compiled=True).label == (
        "rglru:peer:recurrentgemma+compile"
    )
    scan = parse_row("samu:peer:accelerated_scan:reference")
    assert scan.key == ("samu", "peer:accelerated_scan", "reference")
    assert parse_row("rglru:peer:fla_chunk_hgrn").key == ("rglru", "peer:fla_chunk_hgrn", None)
    with pytest.raises(BenchError, match="rglru block without a controller"):
        parse_row("samu:peer:recurrentgemma")
