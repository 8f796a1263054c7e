"""The strip probe's schedules: programs that each stream a list of strip segments in turn.

The persistent time-split scans (``common/persistent.py``: ``pieces=K,programs=P``) give
each of P programs, one per SM, pieces of several channel blocks in turn, so that the
medium reference shape's 160 16-channel blocks load 132 SMs evenly (1.25 blocks' tiles on
the busiest where one program per block leaves some SMs two). A schedule here is such an
order with nothing else in it: no carries, no waits, only each program's tiles of x, y
read and x * y written, all its segments one pipelined loop. Its time is the ceiling a
scan walking the same order could reach, and tells the memory system's cost of the order
(rows out of step, strips changing hands) from the scan's own (its handovers and waits).

A segment is (strip, first tile, tiles); strip s holds channels [s * channels, (s + 1) *
channels) of [L, R] planes, tile t rows [t * tile_rows, (t + 1) * tile_rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

__all__ = [
    "Schedule",
    "Segment",
    "inserted_pieces",
    "piece_major",
    "schedule_probes",
    "segment_table",
    "shifted_strips",
    "whole_strips",
]

Segment = tuple[int, int, int]
"""(strip, first tile, tiles) of one program's walk."""

ProgramSegments = tuple[Segment, ...]


@dataclass(frozen=True)
class Schedule:
    """One launch of the schedule kernel: program i streams ``segments[i]`` in order, of
    [L, ``width``] planes cut into strips of ``channels`` channels and tiles of
    ``tile_rows`` rows; ``stages`` tiles in flight, ``warps`` warps, the tiles loaded
    through the Tensor Memory Accelerator where ``described``, else through pointers."""

    name: str
    segments: tuple[ProgramSegments, ...]
    width: int
    channels: int
    tile_rows: int
    stages: int
    warps: int
    described: bool
    table: ClassVar[str] = "schedules"

    @property
    def programs(self) -> int:
        return len(self.segments)

    @property
    def tiles(self) -> int:
        """Tiles streamed by all programs together."""
        return sum(tiles for program in self.segments for _strip, _first, tiles in program)

    @property
    def busiest_tiles(self) -> int:
        """Tiles streamed by the program with the most."""
        return max(sum(tiles for _strip, _first, tiles in program) for program in self.segments)

    @property
    def reach(self) -> int:
        """Tiles the planes need: one past the last tile any segment streams."""
        return max(first + tiles for program in self.segments for _strip, first, tiles in program)

    @property
    def loads(self) -> str:
        """How the tiles are loaded, as the table prints it."""
        return "TMA" if self.described else "pointers"


def whole_strips(strips: Sequence[int], n_tiles: int) -> tuple[ProgramSegments, ...]:
    """One program per strip of ``strips``, each walking all ``n_tiles`` tiles of its strip:
    the time-split scans' grid of one program per block."""
    return tuple(((strip, 0, n_tiles),) for strip in strips)


def piece_major(
    n_strips: int, n_tiles: int, pieces: int, programs: int
) -> tuple[ProgramSegments, ...]:
    """The persistent scans' order: every strip cut at the same tiles into ``pieces`` pieces
    (the last shorter where they do not divide ``n_tiles``), numbered piece-major (piece q of
    strip j is item q * n_strips + j), program p streaming items p, p + programs, ..."""
    per_piece = -(-n_tiles // pieces)
    items = n_strips * -(-n_tiles // per_piece)

    def piece(item: int) -> Segment:
        first = item // n_strips * per_piece
        return item % n_strips, first, min(per_piece, n_tiles - first)

    return tuple(
        tuple(piece(item) for item in range(program, items, programs))
        for program in range(programs)
    )


def inserted_pieces(n_strips: int, n_tiles: int, programs: int) -> tuple[ProgramSegments, ...]:
    """Programs that own one strip each (strips 0 to programs - 1) and stream one piece of
    another inside it: the strips past ``programs`` are cut into as even pieces as the
    programs allow, and a piece is streamed where its owner reaches the piece's first tile,
    so each piece follows the one before it in time (the form that would keep every carry
    in its program but the inserted pieces')."""
    extra = list(range(programs, n_strips))
    if not 0 < len(extra) <= programs:
        raise ValueError(
            f"n_strips: expected more strips than programs ({programs}) and at most twice as "
            f"many, got {n_strips}"
        )
    counts = [
        programs // len(extra) + (index < programs % len(extra)) for index in range(len(extra))
    ]
    segments: list[ProgramSegments] = []
    for strip, count in zip(extra, counts, strict=True):
        first = 0
        for piece in range(count):
            tiles = n_tiles // count + (piece >= count - n_tiles % count)
            own = len(segments)
            program = ((own, 0, first), (strip, first, tiles), (own, first, n_tiles - first))
            segments.append(tuple(segment for segment in program if segment[2] > 0))
            first += tiles
    return tuple(segments)


def shifted_strips(
    programs: int, n_tiles: int, shifted: int, shift: int
) -> tuple[ProgramSegments, ...]:
    """One program per strip, the first ``shifted`` starting ``shift`` tiles in and wrapping:
    two groups of programs at rows ``shift`` tiles apart, as the pieces of a persistent
    order run."""
    return tuple(
        ((program, shift, n_tiles - shift), (program, 0, shift))
        if program < shifted
        else ((program, 0, n_tiles),)
        for program in range(programs)
    )


def schedule_probes(
    multiprocessors: int, length: int, width: int, *, described: bool
) -> list[Schedule]:
    """[length, width] planes in 16-channel strips: one program per strip, one per SM on as
    many strips as SMs, the persistent order with 2, 4 and 8 pieces per strip, the inserted
    pieces, and a quarter of the one-per-SM programs a quarter of the rows ahead. Each with
    the time-split scans' two pipelines: tiles of 128 rows, three in flight, 4 warps, through
    pointers (their 16-channel programs' where two share an SM), and, where ``described``
    (an sm_90 GPU), 256 rows, four in flight, 8 warps, through the Tensor Memory Accelerator
    (the persistent programs')."""
    channels = 16
    n_strips = width // channels
    programs = min(multiprocessors, n_strips)
    pipelines = [(128, 3, 4, False)] + ([(256, 4, 8, True)] if described else [])
    schedules = []
    for tile_rows, stages, warps, tma in pipelines:
        n_tiles = length // tile_rows
        orders: list[tuple[str, tuple[ProgramSegments, ...]]] = [
            (f"{n_strips} whole strips", whole_strips(range(n_strips), n_tiles)),
            (f"{programs} of them, one per SM", whole_strips(range(programs), n_tiles)),
        ]
        if programs < n_strips:
            for pieces in (2, 4, 8):
                order = piece_major(n_strips, n_tiles, pieces, programs)
                orders.append((f"piece-major, {pieces} pieces", order))
            if n_strips <= 2 * programs:
                orders.append(("inserted pieces", inserted_pieces(n_strips, n_tiles, programs)))
        shifted = shifted_strips(programs, n_tiles, programs // 4, n_tiles // 4)
        orders.append(("one per SM, a quarter shifted", shifted))
        for name, order in orders:
            schedules.append(Schedule(name, order, width, channels, tile_rows, stages, warps, tma))
    return schedules


def segment_table(schedule: Schedule, device: torch.device) -> torch.Tensor:
    """The kernel's SEGMENTS: int32 [programs, most segments, 3], each program's (strip,
    first tile, tiles) in order, padded with zero-tile segments."""
    most = max(len(program) for program in schedule.segments)
    rows = [list(program) + [(0, 0, 0)] * (most - len(program)) for program in schedule.segments]
    return torch.tensor(rows, dtype=torch.int32, device=device)
