"""Launch geometry of the scan kernels: channels per program, warps, pipeline stages and
chunks per program, from a small per-shape heuristic or the ``SAMU_KERNELS_TILE`` override.

The override is a comma-separated list of ``key=value`` pairs, any subset of::

    SAMU_KERNELS_TILE="block_r=64,warps=2,stages=3,chunks=8,unroll=8,prefetch=1"
    SAMU_KERNELS_TILE="block_r=16,split=4,tile_rows=64"
    SAMU_KERNELS_TILE="fwd_split=8"
    SAMU_KERNELS_TILE="lookback=2"
    SAMU_KERNELS_TILE="tma=3"
    SAMU_KERNELS_TILE="block_r=32,channels=24,split=8,tile_rows=128"
    SAMU_KERNELS_TILE="programs=132,split=8,tile_rows=256,fwd_split=0"
    SAMU_KERNELS_TILE="pieces=4,split=8,tile_rows=256,fwd_split=0"
    SAMU_KERNELS_TILE="pieces=4,programs=132,split=8,tile_rows=256,fwd_split=0"

``block_r`` (channels per program, a power of two >= 16), ``warps`` / ``bwd_warps``
(forward / backward warps per program, 1..32, a power of two), ``stages`` (software
pipeline depth of the chunk loops, >= 1), ``chunks`` (consecutive chunks one program of
a hierarchical pass covers, >= 1), ``unroll`` (rows of a chunk unrolled at a time, a
power of two; capped at the chunk length) and ``chained`` (1: each hierarchical direction
in one pass, runs chained in order; 0: three passes) and ``prefetch`` (chunks ahead of the
walk whose inputs each chunk asks L2 for; 0: none; compiled kernels only) and ``split`` (the
sequential kernels only: 0 walks each chunk row by row in a one-warp program; a power of two
W <= 32 splits the rows of each tile across a program of W warps, ``split.py``) and
``tile_rows`` (the rows of such a tile, a power of two rounded up to the chunk) and
``fwd_split`` (the time-split forward's own warps, 0 or a power of two <= 32: 0 takes
``split``; else, where its tiles come through the TMA, its tiles have ``tile_rows *
fwd_split / split`` rows, the backward's elements per thread, the backward keeping
``split`` and ``tile_rows``) and
``lookback`` (hierarchical names with ``grouped_prefix``: 2 runs the chained kernels with a
look-back over run summaries instead of the chain; 0: the three passes or the chained ones;
1, a look-back launch of one register tile per program, was removed after measuring 1.5-3.9x
slower than the three passes) and ``tma`` (time-split programs: 0 loads each tile row by
row through pointers; 2..MAX_TMA_STAGES loads each tile as one box per input through the
Tensor Memory Accelerator, that many tiles in flight, where the GPU and the tensors allow it,
``launch.tile_sources``) and ``channels`` (time-split programs: the channels each program
owns, 1..block_r, its other lanes masked; 0: block_r. C < block_r evens out grids where
16-channel programs load some SMs twice, :func:`one_program_per_sm`; give ``block_r`` with
it, the heuristic's may be smaller) and ``programs`` (time-split programs: at most that many
programs; where the problem has more channel blocks, each program scans a contiguous share of
their tiles, a block cut between two programs handing its state over, ``split.py``; 0: one
program per block) and ``pieces`` (time-split programs: K >= 2 cuts every block at the same
tiles into K pieces of whole tiles, one program each, taken piece-major so that the programs
running side by side scan their blocks' same rows, each piece's state handed to the next,
``split.py``; 0 or 1: whole blocks; with ``programs`` P, at most one per multiprocessor,
P persistent programs take the pieces round-robin, ``persistent.py``). Keys left out keep
the heuristic's value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace

TILE_ENV = "SAMU_KERNELS_TILE"
"""Environment variable overriding the heuristic geometry (benchmark sweeps)."""

MAX_PREFIX_TILE_ELEMENTS = 2048
"""Largest [G, BLOCK_R] tile of the prefix kernel (an associative scan over G summaries)."""

MIN_BLOCK_R = 16
"""Fewest channels per program (half a warp) for narrow problems."""
CHANNELS_PER_WARP = 32
"""One channel per thread: the scan kernels' rows are 1-D [BLOCK_R] vectors."""
WARPS_PER_SM = 16
"""Programs (one warp each) per multiprocessor below which a program keeps one channel per
thread (the sequential kernels get no more programs than B * R / BLOCK_R)."""
UNROLL = 16
"""Rows unrolled at a time by the sequential kernels: in the H200 device-time sweep of
2026-12-03 (docs/performance.md) 16 beat 8 and 4 by 18-26 % there (their few programs need
each one's loads in flight)."""
HIERARCHICAL_WARPS_PER_SM = 32
"""Programs per multiprocessor the hierarchical passes aim for by cutting time into runs."""
HIERARCHICAL_UNROLL = 8
"""Rows unrolled at a time by the hierarchical passes: 8 halves the registers of 16 (RG-LRU
backward runs 196 -> 80), so twice the programs fit. With HIERARCHICAL_WARPS_PER_SM and
MAX_CHUNKS_PER_PROGRAM it was the best geometry of the sweep for every hierarchical
reference row and shape but one (RG-LRU at [1, 32768, 2048], where two channels per thread
with runs of 16 chunks was 14 % faster), 1.2-1.6x faster than 16 rows at 16 warps per SM."""
SEQUENTIAL_PREFETCH = 1
"""Chunks ahead whose inputs the sequential kernels ask L2 for (``Tile.prefetch``). Their few
programs (B * R / BLOCK_R one-warp programs: ~2 per SM on the reference shapes) cannot hide
a chunk's DRAM latency behind each other; in the H200 run of 2026-12-03 one chunk ahead made
them 7-30 % faster (two chunks: no better), while it made the hierarchical passes, with ~32
programs per SM, 4-18 % slower in all but one case: they keep 0."""
SPLIT_ELEMENTS_PER_THREAD = 16
"""Elements of each [B, L, R] input a thread of a time-split sequential program holds per
tile (``Tile.tile_rows`` * ``block_r`` / (32 * ``split``)). With tiles held as 2-D register
tiles (H200 runs of 2026-12-04, "Segments in threads") 8 beat 4 and 16 in 16-channel programs
and 16 beat 8 in 32-channel ones; with tiles held as tuples of rows (docs/performance.md,
"Tile rows in registers"), whose scans need fewer registers and instructions, 16 was the
fastest SAMU geometry on all three reference shapes (0.189 / 0.433 / 0.932 ms against
0.205 / 0.467 / 1.122 at 8); at 16 the final code took 0.165 / 0.403 / 0.926 ms (SAMU
default) and 0.283 / 0.500 / 1.294 ms (RG-LRU's sequential name)."""
COLUMNS_PER_THREAD = 1
"""Tile columns per thread of a time-split program: the launcher sizes SEGMENTS so that a
tile row has this many columns per thread, and a thread holds all S rows of its column. Two
(S / 2 rows of two segments' columns, from when the columns were pairs of adjacent channels)
doubled SEGMENTS and with it the join across segments (``tiles.enter_segments``): in the
16-channel programs of the two long reference shapes that join was 400-600 of the SAMU
backward's SASS instructions per tile and pushed it into spilling (112-116 local-memory
instructions); with one column, 1816 instructions and no spills against 2160 and 116
(Triton 3.6, sm_90; docs/performance.md, "One column per thread"), and that backward 38 % /
29 % faster on the medium / long shapes (H100, "One column per thread, timed")."""
MAX_ELEMENTS_PER_THREAD = 32
"""Most elements of each input a thread of a time-split program may hold per tile (rows per
segment x columns per thread): the tile rows are unrolled, so a thread's registers and the
compile time grow with them. At 32 (then 16 rows of 2 columns) the SAMU backward already
spilled (614 local-memory instructions) and its 18 kernels took 219 s to compile on our CPU;
at 128 (64 rows) one kernel did not compile within 150 s on the H200 host. The heuristic gives
SPLIT_ELEMENTS_PER_THREAD."""
SPLIT_WARPS = 4
"""Warps of a time-split program when the problem has more programs than multiprocessors:
the SAMU backward holds 255 registers per thread, so only 8 warps fit a multiprocessor, and
8-warp programs would run in two waves (SAMU default on [1, 8192, 2560], tile rows at 16
elements per thread: 128-row tiles of 4 warps 0.433 ms, 128 rows of 8 warps 0.518 ms)."""
SPLIT_WARPS_ALONE = 8
"""Warps of a time-split program when every program has a multiprocessor to itself: more
rows per tile keep more loads in flight (SAMU default on [1, 32768, 2048], 16 elements per
thread: 256-row tiles of 8 warps 0.932 ms, of 16 warps at 8 elements 1.336 ms)."""
MAX_SPLIT = 16
"""Most warps of a time-split program."""
CHANNEL_STEP = 8
"""``Tile.channels`` of :func:`one_program_per_sm` come in multiples of 8: bf16 box starts
16 bytes apart, as Triton (its interpreter asserts it) asks of a descriptor load's offsets
(``launch.tma_loadable``)."""
FORWARD_SPLIT_WARPS = 8
"""Warps of the time-split forward programs of SAMU's fused gates where the backward's take
SPLIT_WARPS (``Tile.forward_split``): the forward's ~100 registers fit two 8-warp programs per
SM where the backward's ~240 fit two of 4. H100, 2026-12-05 (docs/performance.md, "The 16-bit
gate form and fwd_split, timed"): the SAMU default 0.98x / 0.99x the time on the short /
medium reference shapes; RG-LRU's time split 1.01x / 1.05x, so it keeps SPLIT_WARPS. Forwards
whose tiles cannot come through the TMA keep ``split`` (``launch._Geometry.forward_sources``)."""
LOOKBACK_RUNS = 2
"""``Tile.lookback`` for the chained kernels with a look-back over run summaries instead of
the chain: a one-warp program walks its run for the summary, looks back, walks it again.
(The value 1 named the look-back form of one register tile per program, removed: measured
1.5-3.9x slower than the three passes on the H200, docs/performance.md.)"""
LOOKBACK_SCAN_ROWS = 16
"""Summaries a look-back composes at a time (one [16, BLOCK_R] associative scan; fewer when
the group is smaller): a whole group of 64 at once held ~50 more registers per thread."""
MAX_TMA_STAGES = 8
"""Most tiles a time-split program keeps in flight through the Tensor Memory Accelerator
(``Tile.tma``): each stage holds a box of every input in shared memory."""
TMA_STAGES = 3
"""The heuristic's depth for SAMU's fused gates (``heuristic_tile(tma_loads=True)``). On the
H100 with the join as one gather (docs/performance.md, "Tiles through the TMA and tanh
sigmoids by default for SAMU") the SAMU default took 0.84 / 0.84 / 0.96x the pointer
loads' time on the three reference shapes (4 stages: 0.82 / 0.84 / 0.97x), RG-LRU's time
split 0.99 / 0.98 / 1.03x, so RG-LRU and precomputed gates keep pointer loads."""
TMA_STAGES_ALONE = 4
"""The heuristic's depth for SAMU's fused gates where every program has a multiprocessor to
itself (SPLIT_WARPS_ALONE): one program must keep the SM's loads in flight alone. On an H100
(2026-12-06, docs/performance.md, "Four tiles in flight for programs alone") the SAMU
default on [1, 32768, 2048] took 0.965-0.969x the time of 3 stages (5: 0.971-0.976x); on
the short shape, two 4-warp programs per SM, 4 stages took 1.055x and on the medium one
1.03x, so those keep TMA_STAGES."""
MAX_CHUNKS_PER_PROGRAM = 8
"""Longest run of a hierarchical program, in chunks: longer runs left too few programs on
the long reference shape in the sweep."""
LIGHT_PASS_CHANNELS_PER_THREAD = 2
"""Channels per thread of hierarchical passes light enough in registers to hold two (the
fused RG-LRU gates: 80 registers at 8 rows), on runs of the same chunks, up to this many
times MAX_CHUNKS_PER_PROGRAM: half the programs, each with twice the loads in flight. In the
H200 sweep of 2026-12-03 (runs then always twice as long) that was 14 % faster on
[1, 32768, 2048] (1.308 vs 1.513 ms), equal on [1, 8192, 2560] and 2 % slower on
[4, 2048, 2048] for RG-LRU, and 16-30 % slower for SAMU (whose backward pass holds 110
registers at one channel per thread). In the H200 sweep of 2026-12-06 and an H100 A/B
(docs/performance.md, "The RG-LRU default's runs") runs twice as long as the one-channel
passes' took 1.24 / 1.21x (H200) and 1.17 / 1.11x (H100) the time of runs of the same chunks
on the short and medium reference shapes, where they left ~10 programs per SM; on the long
shape, where the cap binds, the runs of 16 chunks (31 programs per SM) took 0.995x / 0.980x
the time of runs of 8."""
HEAVY_PASS_RUN_DIVISOR = 2
"""Hierarchical passes heavy in registers (all but the fused RG-LRU gates: SAMU's backward
pass holds 110 per thread) take runs this many times shorter than HIERARCHICAL_WARPS_PER_SM
and MAX_CHUNKS_PER_PROGRAM give: twice the programs, each with half the chain. SAMU's
hierarchical reference name (``..._grouped_prefix64_hierarchical_chunk32``) took 0.987 /
0.963 / 0.964x the time of the longer runs on the three reference shapes in the H200 sweep
of 2026-12-06 and 0.989 / 0.983 / 0.945x on an H100 (docs/performance.md, "The RG-LRU
default's runs"); SAMU's ``..._hierarchical_chunk16`` name and RG-LRU's unfused
hierarchical passes take it untimed."""

_KEYS = {
    "block_r": "block_r",
    "warps": "num_warps",
    "bwd_warps": "backward_warps",
    "stages": "num_stages",
    "chunks": "chunks_per_program",
    "unroll": "unroll",
    "chained": "chained",
    "prefetch": "prefetch",
    "split": "split",
    "tile_rows": "tile_rows",
    "fwd_split": "forward_split",
    "lookback": "lookback",
    "tma": "tma",
    "channels": "channels",
    "programs": "programs",
    "pieces": "pieces",
}


@dataclass(frozen=True)
class Tile:
    """How the scan kernels are launched for one problem.

    block_r: channels per program; num_warps / backward_warps: warps of the forward /
    backward kernels; num_stages: software-pipeline depth of the loops over chunks;
    chunks_per_program: chunks one program of a hierarchical pass covers in order;
    unroll: rows of a chunk unrolled at a time (their loads are issued together);
    chained: 1 runs each hierarchical direction in one pass (``forward_chained_kernel``,
    ``backward_chained_kernel``), 0 in three (summaries, prefix, runs). Off by default:
    measured 0-15 % slower than the three passes on the H200. prefetch: at the start of
    each chunk, the chunk that many chunks ahead of the walk (behind it, in the backward) is
    requested into L2 (``prefetch.global.L2``), so that its loads wait for L2 instead of
    DRAM; 0 turns it off, and the interpreter (no inline assembly) ignores it. split
    (sequential kernels only): 0 walks each chunk row by row in one-warp programs; W > 0
    gives each program W warps that share the rows of each tile, in segments of consecutive rows
    (``split.py``; the warps knobs and unroll, stages and prefetch do not apply to them).
    tile_rows: the rows such a program loads and scans at once, rounded up to the chunk
    (a tile holds whole chunks; 0: one chunk). forward_split: the warps of the
    time-split forward programs, 0 for ``split``'s; their tiles hold ``tile_rows *
    forward_split / split`` rows, so that a thread holds as many elements as in the
    backward (the checkpoints are per chunk, so the two directions' tiles may differ: the
    forward's registers, under half the backward's, leave room for twice the warps).
    lookback (hierarchical names with
    ``grouped_prefix`` only): 2 runs the chained kernels (one-warp runs, walked twice) with a
    look-back over run summaries instead of the chain; 0: the three passes (or the chained
    ones). tma (time-split programs only): 0 loads a tile row by row through pointers (the
    next tile's rows issued before this one is computed); N >= 2 loads each input's tile as
    one [1, TILE, BLOCK_R] box through the Tensor Memory Accelerator, N tiles in flight
    (``tl.range(num_stages=N)``), where ``launch.tile_sources`` finds the GPU and the tensors
    able to (else pointers). channels (time-split programs only): the consecutive channels
    each program owns, at most block_r (the lanes past them are loaded, through the TMA, and
    never stored); 0 for block_r. B * cdiv(R, channels) programs. programs (time-split
    programs only): at most that many programs: where B * cdiv(R, channels) channel blocks
    are more, each program scans a contiguous share of the blocks' tiles (block-major), a
    block cut between two programs handing its state over (``split.forward_split_kernel``);
    0: one program per block. pieces (time-split programs only): K >= 2 cuts every block
    into K pieces of whole tiles at the same rows, one program each, taken in piece-major
    order (``split.piece_of_ticket``); 0 or 1: whole blocks. Both (persistent programs):
    ``programs`` programs, all resident at once (at most one per multiprocessor), take the
    pieces round-robin in piece-major order, each running its pieces' tiles as one loop
    (``persistent.py``).
    """

    block_r: int
    num_warps: int
    backward_warps: int
    num_stages: int
    chunks_per_program: int
    unroll: int
    chained: int = 0
    prefetch: int = 0
    split: int = 0
    tile_rows: int = 0
    forward_split: int = 0
    lookback: int = 0
    tma: int = 0
    channels: int = 0
    programs: int = 0
    pieces: int = 0

    @property
    def program_channels(self) -> int:
        """The channels each program owns: ``channels``, or all its block_r lanes."""
        return self.channels or self.block_r


def _power_of_two_at_least(value: int) -> int:
    return 1 << (max(1, value) - 1).bit_length()


def heuristic_tile(
    batch: int,
    length: int,
    width: int,
    chunk: int,
    *,
    hierarchical: bool,
    multiprocessors: int,
    light_passes: bool = False,
    tma_loads: bool = False,
    even_grid: bool = False,
) -> Tile:
    """The default geometry for inputs [batch, length, width] and chunks of ``chunk`` steps.

    One warp per program. A program owns 32 channels (one per thread), or 64 (two per
    thread, more independent loads in flight) when the batch and width still give
    WARPS_PER_SM programs per multiprocessor; narrow problems get one power-of-two row of at
    least MIN_BLOCK_R channels. The sequential kernels cannot split time, so B * R / BLOCK_R
    programs is all they get, and walk UNROLL rows at a time; the hierarchical passes give
    each program a run of up to MAX_CHUNKS_PER_PROGRAM consecutive chunks, sized so that
    about HIERARCHICAL_WARPS_PER_SM programs per multiprocessor remain, and walk
    HIERARCHICAL_UNROLL rows at a time. One pipeline stage: the unrolled rows' loads are
    issued together, and many resident warps keep enough of them in flight. ``light_passes``
    (hierarchical passes with registers to spare: the fused RG-LRU gates) gives a program of
    32 channels, when the width has more, LIGHT_PASS_CHANNELS_PER_THREAD channels per thread
    on runs of as many chunks (up to as many times MAX_CHUNKS_PER_PROGRAM), so that half the
    programs each keep more loads in flight; the other hierarchical passes take runs
    HEAVY_PASS_RUN_DIVISOR times shorter.
    Sequential kernels split time inside a program (``split.py``): 32 channels per program
    when that gives every multiprocessor a program, else 16 (twice the programs);
    SPLIT_WARPS warps, or SPLIT_WARPS_ALONE when every program has a multiprocessor to
    itself, sharing tiles of as many rows as give each thread SPLIT_ELEMENTS_PER_THREAD
    elements (at least one chunk; more warps, up to MAX_SPLIT, for longer chunks); the row
    walk they replace would prefetch SEQUENTIAL_PREFETCH chunks ahead into L2. ``tma_loads``
    (SAMU's fused gates) loads their tiles through the Tensor Memory Accelerator, TMA_STAGES
    tiles in flight (TMA_STAGES_ALONE for programs alone on their multiprocessor), and gives
    their forward FORWARD_SPLIT_WARPS warps where the backward takes SPLIT_WARPS.
    ``even_grid`` (RG-LRU's fused gates) re-cuts time-split programs to one per
    multiprocessor where 16-channel programs would load some SMs twice
    (:func:`one_program_per_sm`): on [1, 8192, 2560] that was 4 % faster for RG-LRU and 12 %
    slower for SAMU (H100, 2026-12-06).
    """
    n_chunks = -(-length // chunk)
    wide = batch * -(-width // (2 * CHANNELS_PER_WARP)) >= WARPS_PER_SM * multiprocessors
    block_r = 2 * CHANNELS_PER_WARP if wide else CHANNELS_PER_WARP
    block_r = max(MIN_BLOCK_R, min(block_r, _power_of_two_at_least(width)))
    channel_programs = batch * -(-width // block_r)
    chunks_per_program = 1
    unroll = UNROLL
    if hierarchical:
        target_programs = HIERARCHICAL_WARPS_PER_SM * multiprocessors
        runs = max(1, -(-target_programs // channel_programs))
        longest_run = MAX_CHUNKS_PER_PROGRAM
        if light_passes and block_r == CHANNELS_PER_WARP < width:
            block_r *= LIGHT_PASS_CHANNELS_PER_THREAD
            longest_run *= LIGHT_PASS_CHANNELS_PER_THREAD
        chunks_per_program = max(1, min(longest_run, n_chunks // runs))
        if not light_passes:
            chunks_per_program = max(1, chunks_per_program // HEAVY_PASS_RUN_DIVISOR)
        unroll = HIERARCHICAL_UNROLL
    split = tile_rows = forward_split = tma = 0
    if not hierarchical:
        filled = batch * -(-width // CHANNELS_PER_WARP) >= multiprocessors
        block_r = CHANNELS_PER_WARP if filled else MIN_BLOCK_R
        block_r = max(MIN_BLOCK_R, min(block_r, _power_of_two_at_least(width)))
        alone = batch * -(-width // block_r) <= multiprocessors
        split, tile_rows = _split_rows(block_r, SPLIT_WARPS_ALONE if alone else SPLIT_WARPS, chunk)
        if tma_loads:
            tma = TMA_STAGES_ALONE if alone else TMA_STAGES
            if split == SPLIT_WARPS:
                forward_split = FORWARD_SPLIT_WARPS
    tile = Tile(
        block_r=block_r,
        num_warps=1,
        backward_warps=1,
        num_stages=1,
        chunks_per_program=chunks_per_program,
        unroll=min(unroll, chunk),
        prefetch=0 if hierarchical else SEQUENTIAL_PREFETCH,
        split=split,
        tile_rows=tile_rows,
        forward_split=forward_split,
        tma=tma,
    )
    if even_grid and not hierarchical:
        return (
            one_program_per_sm(tile, batch, width, chunk, multiprocessors=multiprocessors) or tile
        )
    return tile


def _split_rows(block_r: int, warps: int, chunk: int) -> tuple[int, int]:
    """(split, tile_rows) of a time-split program of ``block_r`` lanes aiming at ``warps``
    warps: tiles of as many rows as give each thread SPLIT_ELEMENTS_PER_THREAD elements (at
    least one chunk; more warps, up to MAX_SPLIT, for longer chunks)."""
    per_warp = CHANNELS_PER_WARP * SPLIT_ELEMENTS_PER_THREAD // block_r  # rows
    tile_rows = max(chunk, warps * per_warp)
    return min(MAX_SPLIT, tile_rows // per_warp), tile_rows


def one_program_per_sm(
    base: Tile, batch: int, width: int, chunk: int, *, multiprocessors: int
) -> Tile | None:
    """``base`` (a time-split tile) re-cut so that every multiprocessor gets at most one
    program where 16-channel programs would load some SMs twice (B * cdiv(R, 16) between
    the SMs and twice as many): each program owns the fewest multiple of CHANNEL_STEP
    channels (``Tile.channels``) that brings B * cdiv(R, channels) to at most
    ``multiprocessors``, on a power of two of lanes (at most two warps' width),
    SPLIT_WARPS_ALONE warps with the forward on the same, and SPLIT_ELEMENTS_PER_THREAD
    elements per thread. [1, 8192, 2560] on 132 SMs: 107 programs of 24 channels on 32
    lanes. None where the grid is already even (or the batch alone overfills it)."""
    programs = batch * -(-width // MIN_BLOCK_R)
    per_row = multiprocessors // batch
    if not multiprocessors < programs < 2 * multiprocessors or per_row == 0:
        return None
    share = -(-width // per_row)
    channels = -(-share // CHANNEL_STEP) * CHANNEL_STEP
    lanes = _power_of_two_at_least(channels)
    if channels == lanes or lanes > 2 * CHANNELS_PER_WARP:
        return None  # whole blocks already even out (the heuristic's), or too wide
    split, tile_rows = _split_rows(lanes, SPLIT_WARPS_ALONE, chunk)
    return replace(
        base,
        block_r=lanes,
        split=split,
        tile_rows=tile_rows,
        forward_split=0,
        channels=channels,
    )


def balanced_programs(
    base: Tile, batch: int, width: int, chunk: int, *, multiprocessors: int
) -> Tile | None:
    """``base`` (a time-split tile) as one program per multiprocessor where its blocks would
    load some SMs twice (B * cdiv(R, channels) between the SMs and twice as many): each
    program scans a contiguous share of the blocks' tiles (``Tile.programs``), a block cut
    between two programs handing its state over, on SPLIT_WARPS_ALONE warps with the forward
    on the same. [1, 8192, 2560] on 132 SMs: 160 blocks of 16 channels, 1.21 per program.
    None where the grid is already even. Not the heuristic's: on an H100 (2026-12-06,
    docs/performance.md, "Balanced programs, timed") it was 1.18-1.25x slower than the
    whole-block programs on the medium reference shape, because shares start at different
    rows and a 16-channel strip is 32 bytes of each row: programs out of step stream such
    strips at a third of copy bandwidth (``python -m samu_kernels.strip_probe``; "Rows in
    step"). The ``--sweep`` grid holds it."""
    blocks = batch * -(-width // base.program_channels)
    if not multiprocessors < blocks < 2 * multiprocessors:
        return None
    split, tile_rows = _split_rows(base.block_r, SPLIT_WARPS_ALONE, chunk)
    return replace(
        base, split=split, tile_rows=tile_rows, forward_split=0, programs=multiprocessors
    )


BLOCK_PIECES = 4
"""Pieces per block of :func:`block_pieces`: on [1, 8192, 2560] and 132 SMs, 640 pieces of
8-warp programs, 4.85 per SM and 5 on the busiest (1.25 blocks' work, where the heuristic's
busiest SMs scan two whole blocks)."""


def block_pieces(
    base: Tile, batch: int, width: int, chunk: int, *, multiprocessors: int
) -> Tile | None:
    """:func:`balanced_programs`' geometry with every block cut at the same tiles into
    BLOCK_PIECES pieces instead of shares (``Tile.pieces``): the programs running side by
    side scan their blocks' same rows, which balanced shares cannot. None where the grid is
    already even. Not the heuristic's: on an H200 (2026-12-06, docs/performance.md, "Block
    pieces timed") it took 1.03x the whole-block programs' time on the medium reference
    shape (each piece's start costs ~4.6 us); the ``--sweep`` grid holds it."""
    balanced = balanced_programs(base, batch, width, chunk, multiprocessors=multiprocessors)
    return None if balanced is None else replace(balanced, programs=0, pieces=BLOCK_PIECES)


def persistent_pieces(
    base: Tile, batch: int, width: int, chunk: int, *, multiprocessors: int
) -> Tile | None:
    """:func:`block_pieces`' geometry on one persistent program per multiprocessor
    (``Tile.programs`` with ``Tile.pieces``: the programs take the pieces round-robin, each
    running its pieces' tiles as one pipelined loop, ``persistent.py``), with the
    TMA_STAGES_ALONE tiles in flight of programs alone on their SMs where the tiles come
    through the TMA. None where the grid is already even. Not the heuristic's: on the medium
    reference shape it took 0.973x the whole-block programs' time on an H200 and 0.980-0.999x
    on an H100 (2026-12-07, docs/performance.md, "What the persistent pieces wait on, and
    what bounds the medium shape"), not worth programs that must all be resident, whose
    waits on each other could stall a GPU shared with other kernels; the ``--sweep`` grid
    holds it."""
    pieces = block_pieces(base, batch, width, chunk, multiprocessors=multiprocessors)
    if pieces is None:
        return None
    return replace(pieces, programs=multiprocessors, tma=TMA_STAGES_ALONE if pieces.tma else 0)


def parse_tile_override(text: str) -> dict[str, int]:
    """``"block_r=64,stages=3"`` -> ``{"block_r": 64, "num_stages": 3}`` (Tile field names).

    Raises ValueError naming ``SAMU_KERNELS_TILE`` on an unknown key or a bad value.
    """
    values: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or key not in _KEYS:
            raise ValueError(
                f"{TILE_ENV}: expected key=value pairs with keys {sorted(_KEYS)}, got {item!r}"
            )
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{TILE_ENV}: {key} must be an integer, got {raw!r}") from None
        power_of_two = value > 0 and value & (value - 1) == 0
        if key == "block_r" and not (power_of_two and value >= MIN_BLOCK_R):
            raise ValueError(
                f"{TILE_ENV}: block_r must be a power of two >= {MIN_BLOCK_R}, got {value}"
            )
        if key == "unroll" and not power_of_two:
            raise ValueError(f"{TILE_ENV}: unroll must be a power of two, got {value}")
        if key in ("warps", "bwd_warps") and not (power_of_two and value <= 32):
            raise ValueError(f"{TILE_ENV}: {key} must be a power of two in 1..32, got {value}")
        if key == "chained":
            if value not in (0, 1):
                raise ValueError(f"{TILE_ENV}: chained must be 0 or 1, got {value}")
        elif key == "lookback":
            if value not in (0, LOOKBACK_RUNS):
                raise ValueError(
                    f"{TILE_ENV}: lookback must be 0 or {LOOKBACK_RUNS} (the look-back over run "
                    f"summaries), got {value}"
                )
        elif key in ("split", "fwd_split"):
            if value != 0 and not (power_of_two and value <= 32):
                raise ValueError(
                    f"{TILE_ENV}: {key} must be 0 or a power of two in 1..32, got {value}"
                )
        elif key == "tile_rows":
            if value != 0 and not power_of_two:
                raise ValueError(f"{TILE_ENV}: tile_rows must be 0 or a power of two, got {value}")
        elif key == "tma":
            if value != 0 and not 2 <= value <= MAX_TMA_STAGES:
                raise ValueError(
                    f"{TILE_ENV}: tma must be 0 (pointer loads) or 2..{MAX_TMA_STAGES} (tiles "
                    f"in flight through the Tensor Memory Accelerator), got {value}"
                )
        elif key in ("prefetch", "channels", "programs", "pieces"):
            if value < 0:
                raise ValueError(f"{TILE_ENV}: {key} must be >= 0, got {value}")
        elif value < 1:
            raise ValueError(f"{TILE_ENV}: {key} must be >= 1, got {value}")
        values[_KEYS[key]] = value
    return values


def set_tile_override(text: str) -> None:
    """Launch what follows at ``text`` (a ``SAMU_KERNELS_TILE`` value), or at the heuristic's
    geometry for the empty string (the variable unset)."""
    if text:
        os.environ[TILE_ENV] = text
    else:
        os.environ.pop(TILE_ENV, None)


@contextmanager
def tile_override_kept() -> Iterator[None]:
    """Puts ``SAMU_KERNELS_TILE`` back as it was on entry, whatever the body set."""
    previous = os.environ.get(TILE_ENV, "")
    try:
        yield
    finally:
        set_tile_override(previous)


def choose_tile(
    batch: int,
    length: int,
    width: int,
    chunk: int,
    *,
    hierarchical: bool,
    multiprocessors: int,
    light_passes: bool = False,
    tma_loads: bool = False,
    even_grid: bool = False,
) -> Tile:
    """:func:`heuristic_tile` with the ``SAMU_KERNELS_TILE`` override applied; an override
    of ``block_r`` without ``channels`` gives the programs all their lanes."""
    tile = heuristic_tile(
        batch,
        length,
        width,
        chunk,
        hierarchical=hierarchical,
        multiprocessors=multiprocessors,
        light_passes=light_passes,
        tma_loads=tma_loads,
        even_grid=even_grid,
    )
    values = parse_tile_override(os.environ.get(TILE_ENV, ""))
    if "block_r" in values:
        values.setdefault("channels", 0)
    return replace(tile, **values)


def format_tile(tile: Tile) -> str:
    """The override string that reproduces ``tile`` (inverse of the parser)."""
    names = {field: key for key, field in _KEYS.items()}
    return ",".join(f"{names[f.name]}={getattr(tile, f.name)}" for f in fields(tile))
