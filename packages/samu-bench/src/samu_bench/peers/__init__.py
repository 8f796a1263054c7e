"""Peers: the same protocol on the public alternatives to samu (optional extra `peers`).

- Scan peers run samu-modules' RG-LRU block with another library's linear scan,
  registered with samu-kernels as `peer:fla_chunk_hgrn`, `peer:fla_fused_recurrent_hgrn`
  (flash-linear-attention, `fla-core`) and `peer:accelerated_scan` (`accelerated-scan`).
- `peer:recurrentgemma` is recurrentgemma's own torch `ResidualBlock`, with fewer
  samples (its scan is a Python loop) and no compiled row above a length limit.

`available_peers()` says which are installed and why not; `register_scan_peers()`
registers the scan peers; `with_peer_rows(plan, statuses, compiled=..., on_cuda=...)` adds
a case's peer rows (and the skipped ones, with reasons) to its plan.
"""

from samu_bench.peers.accelerated_scans import accelerated_linear_scan, load_accelerated_scan
from samu_bench.peers.fla_scans import (
    chunk_hgrn_linear_scan,
    fused_recurrent_hgrn_linear_scan,
    load_fla_hgrn,
)
from samu_bench.peers.limits import (
    RECURRENTGEMMA_MAX_COMPILED_LENGTH,
    RECURRENTGEMMA_SAMPLE_LIMIT,
    recurrentgemma_compile_refusal,
)
from samu_bench.peers.recurrentgemma_block import (
    RecurrentGemmaBlock,
    build_recurrentgemma_block,
    load_recurrentgemma,
)
from samu_bench.peers.registry import (
    PEERS,
    RECURRENTGEMMA,
    SCAN_PEER_NEEDS_CUDA,
    Peer,
    PeerStatus,
    available_peers,
    is_scan_peer,
    peer_row,
    register_scan_peers,
    with_peer_rows,
)

__all__ = [
    "PEERS",
    "RECURRENTGEMMA",
    "RECURRENTGEMMA_MAX_COMPILED_LENGTH",
    "RECURRENTGEMMA_SAMPLE_LIMIT",
    "SCAN_PEER_NEEDS_CUDA",
    "Peer",
    "PeerStatus",
    "RecurrentGemmaBlock",
    "accelerated_linear_scan",
    "available_peers",
    "build_recurrentgemma_block",
    "chunk_hgrn_linear_scan",
    "fused_recurrent_hgrn_linear_scan",
    "is_scan_peer",
    "load_accelerated_scan",
    "load_fla_hgrn",
    "load_recurrentgemma",
    "peer_row",
    "recurrentgemma_compile_refusal",
    "register_scan_peers",
    "with_peer_rows",
]
