"""The strip probe's kernel: programs streaming channel strips of two planes into a third."""

import triton
import triton.language as tl

SCATTER_MULTIPLIER: tl.constexpr = tl.constexpr(40503)
"""Program i of a scattered probe starts at tile (i * SCATTER_MULTIPLIER + 17) mod n_tiles."""


@triton.jit
def strip_kernel(
    X, Y, OUT, R: tl.constexpr, CHANNELS: tl.constexpr, TILE: tl.constexpr,
    N_TILES: tl.constexpr, SHIFT_TILES, SCATTERED: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """OUT = X * Y on program i's strip of CHANNELS channels of [N_TILES * TILE, R] planes,
    a tile of TILE rows at a time, from tile (i * SHIFT_TILES) mod N_TILES (SCATTERED: a
    multiplicative hash of i) on to the last tile and round from the first; STAGES tiles'
    loads in flight."""
    program = tl.program_id(0)
    columns = program * CHANNELS + tl.arange(0, CHANNELS)
    if SCATTERED:
        phase = (program * SCATTER_MULTIPLIER + 17) % N_TILES
    else:
        phase = (program * SHIFT_TILES) % N_TILES
    rows = tl.arange(0, TILE)
    for step in tl.range(0, N_TILES, num_stages=STAGES):
        tile = (phase + step) % N_TILES
        offsets = (tile * TILE + rows)[:, None] * R + columns[None, :]
        x = tl.load(X + offsets).to(tl.float32)
        y = tl.load(Y + offsets).to(tl.float32)
        tl.store(OUT + offsets, (x * y).to(OUT.dtype.element_ty))
