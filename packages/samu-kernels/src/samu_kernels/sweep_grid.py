"""The geometries ``python -m samu_kernels.benchmark --sweep`` times for one problem.

A handful of neighbours of the heuristic tile (``common/geometry.py``), chosen by registers
and programs per SM: the row walks are latency-bound, and the unrolled rows set the
registers (``scripts/check_kernels_compile.py --stats``: RG-LRU backward 196 registers at
16 rows, 80 at 8; 255, the limit, with two channels per thread at 16 rows). So: half and a
quarter of the unrolled rows, two channels per thread at half the rows, four-warp programs,
and, for the hierarchical backends, longer and shorter runs of chunks per program (fewer or
more programs), the L2 prefetch they do not use by default (``prefetch=1``) and the one-pass
chained passes (``chained=1``, also with runs twice as long: half the hops in series, when
the grid has room). The sequential backends' time-split programs (``split.py``) get twice and
half the warps on the same tile, the forward alone with twice the warps (``fwd_split``: its
registers, under half the backward's, leave room for them; where its tiles still fit one
Tensor Memory Accelerator box) or, where the heuristic gives it that, with the backward's,
tiles twice and half as long at the same elements per thread, a tile half as long on the
same warps (half the elements per thread: the SAMU backward's 242 registers at 16 become
155 at 8, three programs per SM instead of two), twice and half the channels with the tile
length that keeps them, one program per SM where 16-channel programs would load some SMs
twice (``geometry.one_program_per_sm``: programs owning fewer channels than their lanes;
for RG-LRU's fused gates, whose heuristic that is, the 16-channel programs, the neighbours
cut from them; ``geometry.balanced_programs``: one program per SM scanning a share of the
blocks' tiles; ``geometry.block_pieces``: the same warps on every block cut into pieces at
the same tiles; and ``geometry.persistent_pieces``: those pieces taken round-robin by one
persistent program per SM), and the one-warp row walk they replace (``split=0``).
``chunks_per_program`` is a runtime argument (no recompilation); the other knobs each
compile new kernels. The hierarchical grid also holds the heuristic's other
channels-per-thread choice (``light_passes``).
"""

from __future__ import annotations

from dataclasses import replace

from samu_kernels.backends import parse_backend
from samu_kernels.common.geometry import (
    MIN_BLOCK_R,
    Tile,
    balanced_programs,
    block_pieces,
    heuristic_tile,
    one_program_per_sm,
    persistent_pieces,
)
from samu_kernels.common.launch import TMA_BOX_LIMIT

MAX_GEOMETRIES = 14


def sweep_tiles(
    backend: str, shape: tuple[int, int, int], multiprocessors: int, *, tma_loads: bool = False
) -> list[Tile]:
    """Up to MAX_GEOMETRIES distinct tiles for ``backend`` on ``shape`` [B, L, R], the
    heuristic's first; ``tma_loads`` as the launcher passes it (SAMU's fused gates), so that
    every time-split geometry loads its tiles as the default does."""
    spec = parse_backend(backend)
    if spec.chunk is None:
        raise ValueError(f"backend must be a Triton backend, got {backend!r}")
    batch, length, width = shape
    chunk = spec.chunk

    def heuristic(light_passes: bool, even_grid: bool = False) -> Tile:
        return heuristic_tile(
            batch,
            length,
            width,
            chunk,
            hierarchical=spec.hierarchical,
            multiprocessors=multiprocessors,
            light_passes=light_passes,
            tma_loads=tma_loads,
            even_grid=even_grid,
        )

    if not spec.hierarchical:
        # The fused RG-LRU gates even the grid out, as the launcher decides; the neighbours
        # are cut from the programs that own all their lanes.
        whole = heuristic(spec.fused)
        even = one_program_per_sm(whole, batch, width, chunk, multiprocessors=multiprocessors)
        balanced = balanced_programs(whole, batch, width, chunk, multiprocessors=multiprocessors)
        pieces = block_pieces(whole, batch, width, chunk, multiprocessors=multiprocessors)
        persistent = persistent_pieces(whole, batch, width, chunk, multiprocessors=multiprocessors)
        return _unique(
            [
                heuristic(spec.fused, even_grid=spec.fused),
                whole,
                *[tile for tile in (even, balanced, pieces, persistent) if tile is not None],
                *_split_neighbours(whole),
            ]
        )
    base = heuristic(spec.fused)  # the fused RG-LRU gates are light, as the launcher decides
    fewer_rows = replace(base, unroll=max(1, base.unroll // 2))
    runs = base.chunks_per_program
    return _unique(
        [
            base,
            fewer_rows,
            replace(base, unroll=max(1, base.unroll // 4)),
            replace(fewer_rows, block_r=2 * base.block_r),
            replace(base, block_r=4 * base.block_r, num_warps=4, backward_warps=4),
            heuristic(not spec.fused),  # the other channels-per-thread choice
            replace(base, chunks_per_program=2 * runs),
            replace(base, chunks_per_program=max(1, runs // 2)),
            replace(fewer_rows, chunks_per_program=max(1, runs // 2)),
            replace(base, prefetch=1),
            replace(base, chained=1),
            replace(base, chained=1, chunks_per_program=2 * runs),
        ]
    )


def _split_neighbours(base: Tile) -> list[Tile]:
    """Neighbours of a time-split sequential tile, and the row walk (``split=0``)."""
    rows, warps, block_r = base.tile_rows, base.split, base.block_r
    return [
        replace(base, split=2 * warps),
        *(
            [replace(base, forward_split=0 if base.forward_split else 2 * warps)]
            if base.forward_split or (base.tma and 2 * rows <= TMA_BOX_LIMIT)
            else []
        ),
        replace(base, split=max(1, warps // 2)),
        replace(base, tile_rows=2 * rows, split=2 * warps),
        replace(base, tile_rows=max(1, rows // 2), split=max(1, warps // 2)),
        replace(base, tile_rows=max(1, rows // 2)),
        replace(base, block_r=2 * block_r, tile_rows=max(1, rows // 2)),
        replace(base, block_r=max(MIN_BLOCK_R, block_r // 2), tile_rows=2 * rows),
        replace(base, split=0),
    ]


def _unique(candidates: list[Tile]) -> list[Tile]:
    """The first MAX_GEOMETRIES distinct tiles of ``candidates``, in order."""
    unique: list[Tile] = []
    for tile in candidates:
        if tile not in unique:
            unique.append(tile)
    return unique[:MAX_GEOMETRIES]
