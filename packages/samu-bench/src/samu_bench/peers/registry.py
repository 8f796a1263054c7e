"""Which peers are installed, their registration with samu-kernels, and their rows.

Peers are optional (`pip install 'samu-bench[peers]'`). A peer is available when its
library imports; otherwise its status says why, in one line, and its rows are skipped.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import samu_kernels
from samu_bench.errors import first_line
from samu_bench.peers.accelerated_scans import accelerated_linear_scan, load_accelerated_scan
from samu_bench.peers.fla_scans import (
    chunk_hgrn_linear_scan,
    fused_recurrent_hgrn_linear_scan,
    load_fla_hgrn,
)
from samu_bench.peers.limits import RECURRENTGEMMA_SAMPLE_LIMIT, recurrentgemma_compile_refusal
from samu_bench.peers.recurrentgemma_block import build_recurrentgemma_block, load_recurrentgemma
from samu_bench.plan import CasePlan, Row, SkippedRow
from samu_kernels.peers import LinearScanFn

__all__ = [
    "PEERS",
    "RECURRENTGEMMA",
    "SCAN_PEER_NEEDS_CUDA",
    "Peer",
    "PeerStatus",
    "available_peers",
    "is_scan_peer",
    "peer_row",
    "register_scan_peers",
    "with_peer_rows",
]


def _fla_chunk_hgrn() -> LinearScanFn:
    return chunk_hgrn_linear_scan(load_fla_hgrn()[0])


def _fla_fused_recurrent_hgrn() -> LinearScanFn:
    return fused_recurrent_hgrn_linear_scan(load_fla_hgrn()[1])


def _accelerated_scan() -> LinearScanFn:
    return accelerated_linear_scan(load_accelerated_scan())


def _import_recurrentgemma() -> None:
    load_recurrentgemma()


@dataclass(frozen=True)
class Peer:
    """A public alternative to samu's block or scan.

    Attributes:
        backend: the backend recorded in its rows, `peer:<id>`.
        distribution: the PyPI distribution that provides it.
        load_scan: for a scan peer, imports the library and returns the samu-kernels
            linear scan to register under `backend`; None for a whole-block peer.
        check_import: for a whole-block peer, imports the library (raises if it cannot).
    """

    backend: str
    distribution: str
    load_scan: Callable[[], LinearScanFn] | None = None
    check_import: Callable[[], None] | None = None

    def load(self) -> LinearScanFn | None:
        """Import the peer's library: its linear scan (scan peers) or None (block peers)."""
        if self.load_scan is not None:
            return self.load_scan()
        if self.check_import is not None:
            self.check_import()
        return None


RECURRENTGEMMA = Peer("peer:recurrentgemma", "recurrentgemma", check_import=_import_recurrentgemma)
"""recurrentgemma's own torch `ResidualBlock`."""

PEERS: tuple[Peer, ...] = (
    Peer("peer:fla_chunk_hgrn", "fla-core", load_scan=_fla_chunk_hgrn),
    Peer("peer:fla_fused_recurrent_hgrn", "fla-core", load_scan=_fla_fused_recurrent_hgrn),
    Peer("peer:accelerated_scan", "accelerated-scan", load_scan=_accelerated_scan),
    RECURRENTGEMMA,
)
"""Every peer, in the order of their rows."""


@dataclass(frozen=True)
class PeerStatus:
    """Whether a peer can run here.

    Attributes:
        backend: the peer's `peer:<id>` backend.
        distribution: its PyPI distribution.
        version: the installed version of the distribution, None if not installed.
        reason: None when available, else one line saying why not.
    """

    backend: str
    distribution: str
    version: str | None
    reason: str | None

    @property
    def available(self) -> bool:
        """True when the peer's library imported."""
        return self.reason is None

    @property
    def message(self) -> str:
        """One line for the user, e.g. `peer:accelerated_scan skipped: ...`."""
        if self.reason is None:
            return f"{self.backend}: {self.distribution} {self.version}"
        return f"{self.backend} skipped: {self.reason}"


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _load(peer: Peer) -> tuple[PeerStatus, LinearScanFn | None]:
    """Import a peer's library; any failure makes it unavailable with the first line why."""
    version = _installed_version(peer.distribution)
    try:
        scan = peer.load()
    except Exception as error:
        what = "is not installed" if version is None else f"{version} does not import"
        detail = first_line(str(error)) or type(error).__name__
        reason = (
            f"{peer.distribution} {what} (install samu-bench[peers]): "
            f"{type(error).__name__}: {detail}"
        )
        return PeerStatus(peer.backend, peer.distribution, version, reason), None
    return PeerStatus(peer.backend, peer.distribution, version, None), scan


def available_peers() -> dict[str, PeerStatus]:
    """The status of every peer, by backend name (imports each peer's library)."""
    return {peer.backend: _load(peer)[0] for peer in PEERS}


def register_scan_peers() -> dict[str, PeerStatus]:
    """Register every importable scan peer with `samu_kernels.register_linear_scan`.

    Idempotent: registering again replaces a peer's scan with an equal one. Afterwards
    `peer:<id>` names a samu-kernels backend for both architectures (e.g. the row
    `samu:peer:fla_chunk_hgrn:reference`).

    Returns:
        The status of every peer (block peers included), by backend name.
    """
    statuses: dict[str, PeerStatus] = {}
    for peer in PEERS:
        status, scan = _load(peer)
        if scan is not None:
            samu_kernels.register_linear_scan(peer.backend, scan)
        statuses[peer.backend] = status
    return statuses


SCAN_PEER_NEEDS_CUDA = "its Triton kernels need a CUDA GPU"
"""Why a scan peer is skipped on a machine without CUDA."""


def is_scan_peer(backend: str) -> bool:
    """Whether `backend` names one of the scan peers (registered with samu-kernels)."""
    return any(peer.backend == backend and peer.load_scan is not None for peer in PEERS)


def peer_row(backend: str, *, compiled: bool = False) -> Row:
    """The RG-LRU row of peer `backend`.

    recurrentgemma's row builds its own block and carries its sample limit; a scan peer's
    row is samu-modules' RG-LRU block with the peer's scan (register it first with
    :func:`register_scan_peers`).

    Raises:
        ValueError: `backend` is no peer.
    """
    if backend == RECURRENTGEMMA.backend:
        return Row(
            "rglru",
            backend,
            None,
            compiled,
            build_recurrentgemma_block,
            RECURRENTGEMMA_SAMPLE_LIMIT,
        )
    if not is_scan_peer(backend):
        names = ", ".join(peer.backend for peer in PEERS)
        raise ValueError(f"backend must be one of the peers {names}, got {backend!r}")
    return Row("rglru", backend, None, compiled)


def _skip(backend: str, compiled: bool, reason: str) -> SkippedRow:
    return SkippedRow("rglru", peer_row(backend, compiled=compiled).recorded_backend, None, reason)


def with_peer_rows(
    plan: CasePlan, statuses: Mapping[str, PeerStatus], *, compiled: bool, on_cuda: bool
) -> CasePlan:
    """`plan` with a row for every peer in `statuses`: eager, and compiled if asked.

    A peer that is unavailable, a scan peer without CUDA and a compiled recurrentgemma row
    longer than its compile limit become skipped rows with the reason; a peer row the
    plan already has is kept once.
    """
    rows = list(plan.rows)
    skipped = list(plan.skipped)
    taken = {row.key for row in rows} | {row.key for row in skipped}
    for backend, status in statuses.items():
        for flag in (False, True) if compiled else (False,):
            row = peer_row(backend, compiled=flag)
            if row.key in taken:
                continue
            reason = status.reason
            if reason is None and not on_cuda and is_scan_peer(backend):
                reason = SCAN_PEER_NEEDS_CUDA
            if reason is None and flag and backend == RECURRENTGEMMA.backend:
                reason = recurrentgemma_compile_refusal(plan.case.length)
            if reason is None:
                rows.append(row)
            else:
                skipped.append(_skip(backend, flag, reason))
    return CasePlan(plan.case, tuple(rows), tuple(skipped))
