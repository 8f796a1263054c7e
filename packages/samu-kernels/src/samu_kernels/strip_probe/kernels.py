"""The strip probe's kernels: programs streaming channel strips of two planes into a third, each
at one phase (:func:`strip_kernel`) or along a list of segments (:func:`schedule_kernel`)."""

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


@triton.jit
def schedule_kernel(
    X, Y, OUT, X_BOXES, Y_BOXES, SEGMENTS, R: tl.constexpr, CHANNELS: tl.constexpr,
    TILE: tl.constexpr, MAX_SEGMENTS: tl.constexpr, STAGES: tl.constexpr,
    DESCRIBED: tl.constexpr,
):  # fmt: skip
    """OUT = X * Y on program i's segments: row i of SEGMENTS (int32 [programs, MAX_SEGMENTS,
    3]) lists (strip, first tile, tiles), zero-tile segments last; the program streams them
    in order, all their tiles one loop with STAGES tiles' loads in flight, as a persistent
    scan's programs walk their pieces. DESCRIBED: X and Y through the Tensor Memory
    Accelerator (X_BOXES, Y_BOXES: tensor descriptors of [TILE, CHANNELS] boxes), else
    through pointers."""
    row = SEGMENTS + tl.program_id(0) * MAX_SEGMENTS * 3
    strips = ()
    firsts = ()
    begins = ()
    steps = 0
    for k in tl.static_range(MAX_SEGMENTS):
        strips = strips + (tl.load(row + 3 * k),)  # type: ignore[assignment]  # noqa: RUF005
        firsts = firsts + (tl.load(row + 3 * k + 1),)  # type: ignore[assignment]  # noqa: RUF005
        begins = begins + (steps,)  # type: ignore[assignment]  # noqa: RUF005
        steps += tl.load(row + 3 * k + 2)
    rows = tl.arange(0, TILE)
    lanes = tl.arange(0, CHANNELS)
    for step in tl.range(0, steps, num_stages=STAGES):
        strip = 0
        tile = 0
        for k in tl.static_range(MAX_SEGMENTS):
            inside = step >= begins[k]
            strip = tl.where(inside, strips[k], strip)
            tile = tl.where(inside, firsts[k] + step - begins[k], tile)
        offsets = (tile * TILE + rows)[:, None] * R + (strip * CHANNELS + lanes)[None, :]
        if DESCRIBED:
            x = X_BOXES.load([tile * TILE, strip * CHANNELS]).to(tl.float32)
            y = Y_BOXES.load([tile * TILE, strip * CHANNELS]).to(tl.float32)
        else:
            x = tl.load(X + offsets).to(tl.float32)
            y = tl.load(Y + offsets).to(tl.float32)
        tl.store(OUT + offsets, (x * y).to(OUT.dtype.element_ty))
