"""Peer availability, skip messages, registration with samu-kernels, and peer rows."""

from __future__ import annotations

import sys

import pytest
import torch

import samu_kernels
from samu_bench import CasePlan, CaseSpec, ProtocolSettings, Row, build_residual_block
from samu_bench.peers import (
    PEERS,
    RECURRENTGEMMA_MAX_COMPILED_LENGTH,
    RECURRENTGEMMA_SAMPLE_LIMIT,
    SCAN_PEER_NEEDS_CUDA,
    Peer,
    PeerStatus,
    available_peers,
    is_scan_peer,
    peer_row,
    register_scan_peers,
    with_peer_rows,
)
from samu_bench.peers import registry as peer_registry
from samu_bench.peers.recurrentgemma_block import build_recurrentgemma_block
from samu_bench.plan import SampleLimit
from samu_kernels.common.reference import linear_scan_reference
from samu_kernels.peers import registered_peers

PEER_MODULES = {
    "fla": ("fla", "fla.ops", "fla.ops.hgrn"),
    "accelerated_scan": ("accelerated_scan", "accelerated_scan.scalar"),
    "recurrentgemma": (
        "recurrentgemma",
        "recurrentgemma.common",
        "recurrentgemma.torch",
        "recurrentgemma.torch.modules",
    ),
}


def hide_module(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Make `import package...` fail as if the package were not installed."""
    for name in PEER_MODULES[package]:
        monkeypatch.setitem(sys.modules, name, None)


def all_available() -> dict[str, PeerStatus]:
    return {
        peer.backend: PeerStatus(peer.backend, peer.distribution, "1.0", None) for peer in PEERS
    }


def test_peer_backends_are_valid_samu_kernels_names() -> None:
    for peer in PEERS:
        assert samu_kernels.parse_backend(peer.backend).external == peer.backend


def test_missing_libraries_are_reported_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    for package in PEER_MODULES:
        hide_module(monkeypatch, package)
    statuses = available_peers()
    assert list(statuses) == [peer.backend for peer in PEERS]
    for status in statuses.values():
        assert not status.available
        assert status.reason is not None
        assert status.distribution in status.reason
        assert "samu-bench[peers]" in status.reason
        assert status.message.startswith(f"{status.backend} skipped: ")
        assert "\n" not in status.message


def test_not_installed_is_said_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_module(monkeypatch, "fla")
    monkeypatch.setattr(peer_registry, "_installed_version", lambda distribution: None)
    status = available_peers()["peer:fla_chunk_hgrn"]
    assert status.reason is not None
    assert status.reason.startswith("fla-core is not installed (install samu-bench[peers])")
    assert status.version is None


def test_recurrentgemma_is_available_here() -> None:
    """recurrentgemma is a dev dependency of the workspace."""
    status = available_peers()["peer:recurrentgemma"]
    assert status.available, status.reason
    assert status.version is not None
    assert status.message == f"peer:recurrentgemma: recurrentgemma {status.version}"


def test_register_scan_peers_registers_only_importable_scans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def importable() -> samu_kernels.peers.LinearScanFn:
        return linear_scan_reference

    def broken() -> samu_kernels.peers.LinearScanFn:
        raise RuntimeError("triton 9 is too new\nsecond line")

    peers = (
        Peer("peer:test_importable", "samu-kernels", load_scan=importable),
        Peer("peer:test_broken", "no-such-distribution", load_scan=broken),
        peer_registry.RECURRENTGEMMA,
    )
    monkeypatch.setattr(peer_registry, "PEERS", peers)
    for _ in range(2):  # idempotent
        statuses = register_scan_peers()
    assert "peer:test_importable" in registered_peers()
    assert "peer:test_broken" not in registered_peers()
    assert statuses["peer:test_importable"].available
    assert statuses["peer:test_broken"].reason == (
        "no-such-distribution is not installed (install samu-bench[peers]): "
        "RuntimeError: triton 9 is too new"
    )
    assert statuses["peer:recurrentgemma"].available


def test_a_registered_peer_runs_both_architectures() -> None:
    """A scan peer computes the reference's function inside a samu-kernels scan."""
    samu_kernels.register_linear_scan("peer:test_reference_loop", linear_scan_reference)
    generator = torch.Generator().manual_seed(3)
    u, gate_x, gate_a, y = (torch.randn(2, 9, 6, generator=generator) for _ in range(4))
    a_param = torch.rand(6, generator=generator)
    segment_pos = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 0, 1, 2, 3]])
    peer = samu_kernels.rglru_scan(
        u, gate_x, gate_a, a_param, y, segment_pos=segment_pos, backend="peer:test_reference_loop"
    )
    reference = samu_kernels.rglru_scan(
        u, gate_x, gate_a, a_param, y, segment_pos=segment_pos, backend="reference"
    )
    difference = (peer.output - reference.output).norm() / reference.output.norm()
    assert float(difference) < 1e-6

    weights = (torch.randn(6, generator=generator) for _ in range(2))
    scalars = [torch.tensor(value) for value in (0.1, -0.2, 2.0, 0.3)]
    gate_a_weight, gate_x_weight = weights
    samu_arguments = (u, y, a_param, gate_a_weight, scalars[0], gate_x_weight, scalars[1])
    samu_outputs = [
        samu_kernels.samu_scan(
            *samu_arguments,
            scalars[2],
            scalars[3],
            segment_pos=segment_pos,
            backend=backend,
            controller="reference",
        ).output
        for backend in ("peer:test_reference_loop", "reference")
    ]
    difference = (samu_outputs[0] - samu_outputs[1]).norm() / samu_outputs[1].norm()
    assert float(difference) < 1e-6


def plan_of_length(length: int) -> CasePlan:
    case = CaseSpec(name="peers", batch=1, length=length, width=32, rnn_width=32, depth=2)
    return CasePlan(case, (Row("rglru", "reference", None),))


def peer_keys(plan: CasePlan) -> list[tuple[str, str, str | None]]:
    return [row.key for row in plan.rows[1:]]


def test_peer_rows_eager() -> None:
    plan = with_peer_rows(plan_of_length(4096), all_available(), compiled=False, on_cuda=True)
    assert peer_keys(plan) == [("rglru", peer.backend, None) for peer in PEERS]
    assert not any(row.compiled for row in plan.rows)
    assert plan.skipped == ()
    rows = {row.backend: row for row in plan.rows}
    assert rows["peer:recurrentgemma"].sample_limit is RECURRENTGEMMA_SAMPLE_LIMIT
    assert rows["peer:recurrentgemma"].build_module is build_recurrentgemma_block
    assert rows["peer:fla_chunk_hgrn"].sample_limit is None
    assert rows["peer:fla_chunk_hgrn"].build_module is build_residual_block


def test_compiled_recurrentgemma_is_refused_above_the_length_limit() -> None:
    long_plan = plan_of_length(RECURRENTGEMMA_MAX_COMPILED_LENGTH + 1)
    plan = with_peer_rows(long_plan, all_available(), compiled=True, on_cuda=True)
    assert len(plan.rows) == 1 + 2 * len(PEERS) - 1
    assert ("rglru", "peer:fla_chunk_hgrn+compile", None) in peer_keys(plan)
    (skipped,) = plan.skipped
    assert "unroll" in skipped.reason
    assert skipped.entry() == {
        "architecture": "rglru",
        "backend": "peer:recurrentgemma+compile",
        "controller": None,
        "reason": skipped.reason,
    }
    short_plan = plan_of_length(RECURRENTGEMMA_MAX_COMPILED_LENGTH)
    short = with_peer_rows(short_plan, all_available(), compiled=True, on_cuda=True)
    assert len(short.rows) == 1 + 2 * len(PEERS)
    assert short.skipped == ()


def test_unavailable_peers_become_skipped_rows() -> None:
    statuses = all_available()
    statuses["peer:accelerated_scan"] = PeerStatus(
        "peer:accelerated_scan", "accelerated-scan", None, "accelerated-scan is not installed"
    )
    plan = with_peer_rows(plan_of_length(64), statuses, compiled=True, on_cuda=True)
    skipped = {entry.backend: entry.reason for entry in plan.skipped}
    assert skipped == {
        "peer:accelerated_scan": "accelerated-scan is not installed",
        "peer:accelerated_scan+compile": "accelerated-scan is not installed",
    }
    assert len(plan.rows) == 1 + 2 * (len(PEERS) - 1)


def test_scan_peers_are_skipped_without_cuda() -> None:
    plan = with_peer_rows(plan_of_length(64), all_available(), compiled=False, on_cuda=False)
    assert peer_keys(plan) == [("rglru", "peer:recurrentgemma", None)]
    assert {entry.reason for entry in plan.skipped} == {SCAN_PEER_NEEDS_CUDA}
    assert len(plan.skipped) == len(PEERS) - 1


def test_a_peer_row_already_in_the_plan_is_kept_once() -> None:
    base = plan_of_length(64)
    plan = CasePlan(base.case, (*base.rows, peer_row("peer:recurrentgemma")))
    extended = with_peer_rows(plan, all_available(), compiled=False, on_cuda=True)
    assert [row.backend for row in extended.rows].count("peer:recurrentgemma") == 1


def test_peer_row_refuses_other_backends() -> None:
    with pytest.raises(ValueError, match="backend must be one of the peers"):
        peer_row("reference")
    assert is_scan_peer("peer:fla_chunk_hgrn")
    assert not is_scan_peer("peer:recurrentgemma")
    assert not is_scan_peer("reference")


def test_sample_limit_caps_and_records() -> None:
    row = peer_row("peer:recurrentgemma")
    requested = ProtocolSettings(samples=10, warmup=3)
    assert requested.for_row(row) == ProtocolSettings(samples=3, warmup=2)
    assert ProtocolSettings(samples=2, warmup=2).for_row(row) == ProtocolSettings(2, 2)
    assert requested.for_row(peer_row("peer:accelerated_scan")) is requested
    assert RECURRENTGEMMA_SAMPLE_LIMIT.row_extras(requested) == {
        "samples_requested": 10,
        "warmup_steps": 2,
        "sample_limit_reason": RECURRENTGEMMA_SAMPLE_LIMIT.reason,
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((0, 2, "slow"), "max_samples must be at least 1"),
        ((1, 1, "slow"), "max_warmup must be at least 2"),
        ((1, 2, ""), "reason must not be empty"),
    ],
)
def test_sample_limit_refuses_bad_values(arguments: tuple[int, int, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SampleLimit(*arguments)
