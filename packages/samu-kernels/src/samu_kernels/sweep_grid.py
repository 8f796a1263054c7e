"""The geometries ``python -m samu_kernels.benchmark --sweep`` times for one problem.

A handful of neighbours of the heuristic tile (``common/geometry.py``): twice and half the
unrolled rows, two channels per thread, four-warp programs and, for the hierarchical
backends, longer and shorter runs of chunks per program (more or fewer programs), or for
the sequential ones two pipeline stages, half-warp rows and wider rows with twice the
unrolled rows (the only ways they get more loads in flight). ``chunks_per_program`` is a
runtime argument (no recompilation); the other knobs each compile new kernels.
"""

from __future__ import annotations

from dataclasses import replace

from samu_kernels.backends import parse_backend
from samu_kernels.common.geometry import MIN_BLOCK_R, Tile, heuristic_tile

MAX_GEOMETRIES = 8


def sweep_tiles(backend: str, shape: tuple[int, int, int], multiprocessors: int) -> list[Tile]:
    """Up to MAX_GEOMETRIES distinct tiles for ``backend`` on ``shape`` [B, L, R], the
    heuristic's first."""
    spec = parse_backend(backend)
    if spec.chunk is None:
        raise ValueError(f"backend must be a Triton backend, got {backend!r}")
    batch, length, width = shape
    base = heuristic_tile(
        batch,
        length,
        width,
        spec.chunk,
        hierarchical=spec.hierarchical,
        multiprocessors=multiprocessors,
    )
    wider = replace(base, block_r=2 * base.block_r)
    candidates = [
        base,
        replace(base, unroll=2 * base.unroll),
        replace(base, unroll=max(1, base.unroll // 2)),
        wider,
        replace(base, block_r=4 * base.block_r, num_warps=4, backward_warps=4),
    ]
    if spec.hierarchical:
        runs = base.chunks_per_program
        candidates += [
            replace(base, chunks_per_program=2 * runs),
            replace(base, chunks_per_program=max(1, runs // 2)),
            replace(base, unroll=2 * base.unroll, chunks_per_program=max(1, runs // 2)),
        ]
    else:
        candidates += [
            replace(base, num_stages=2),
            replace(base, block_r=max(MIN_BLOCK_R, base.block_r // 2)),
            replace(wider, unroll=2 * base.unroll),
        ]
    unique: list[Tile] = []
    for tile in candidates:
        if tile not in unique:
            unique.append(tile)
    return unique[:MAX_GEOMETRIES]
