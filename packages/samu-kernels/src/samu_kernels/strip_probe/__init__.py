"""The memory system's rate for a scan's access pattern: programs streaming channel strips.

Run on a CUDA GPU::

    python -m samu_kernels.strip_probe --out strips.json
    python -m samu_kernels.strip_probe --table schedules --out orders.json

The time-split scans give each program a strip of 16 or 32 channels of the [B, L, R] inputs
and walk it row by row, so a program reads 32 or 64 bytes of every 5,120-byte row of the
medium reference shape. This probe streams such strips with a kernel that does nothing else
(x and y in, x * y out, bf16: the SAMU forward's u and y to its output), every program
walking all L rows of its strip in tiles, starting at a tile its ``phase`` names and
wrapping, so that every variant moves the same bytes (the schedules' programs walk lists of
segments instead). Three tables, ``--table`` picks some:

- **phases**: the medium shape's planes [8192, 2560] cut into 8-, 16- and 32-channel strips,
  the programs walking them in step (every program at the same row), shifted by one, eight
  or a fifth of the strip's tiles per program, or at scattered rows. Balanced time-split
  programs (``SAMU_KERNELS_TILE=programs=N``) start their pieces at different rows.
- **grids**: 16-channel strips in step, one program per SM, the medium shape's 160 programs,
  two per SM and 320, at several pipeline depths (rows per tile x tiles in flight), in step
  and scattered: the rate a scan of that grid could reach.
- **schedules**: programs that stream lists of strip segments in turn (``schedules.py``): the
  persistent scans' piece-major orders and others, with nothing waiting, through pointers
  and (sm_90) through the Tensor Memory Accelerator: the ceiling of each order.

Each variant's time is the median of ``--rounds`` interleaved rounds (in order, then
reversed) of a CUDA-graph replay (``triton.testing.do_bench_cudagraph``).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from samu_kernels.benchmark import measure_copy_bandwidth, provenance
from samu_kernels.common.launch import tma_device
from samu_kernels.compare_tiles import interleaved_rounds, refuse_too_few_rounds
from samu_kernels.result_file import add_result_file_options, refuse_unwritable_result_file
from samu_kernels.strip_probe.kernels import schedule_kernel, strip_kernel
from samu_kernels.strip_probe.schedules import Schedule, schedule_probes, segment_table

__all__ = [
    "BALANCED_SHARE_OFFSET",
    "MAX_ELEMENTS",
    "MEDIUM_LENGTH",
    "MEDIUM_WIDTH",
    "TABLES",
    "ProbeTiming",
    "Schedule",
    "StripProbe",
    "grid_probes",
    "main",
    "phase_probes",
    "probe_bytes",
    "stream_schedule",
    "stream_strips",
    "time_probes",
]

MEDIUM_LENGTH = 8192
MEDIUM_WIDTH = 2560
"""The medium reference shape's rows and channels (``state2560_medium``, batch 1)."""
MAX_ELEMENTS = 2**31 - 1
"""The largest plane the strip kernel addresses (int32 offsets)."""
TABLES = ("phases", "grids", "schedules")
"""The probe's tables, in the order it prints them."""
BALANCED_SHARE_OFFSET = 0.21
"""How far apart, in blocks, balanced programs' shares start on the medium shape: 160
16-channel blocks on 132 SMs give shares of 1.21 blocks (``SAMU_KERNELS_TILE=programs=132``)."""


@dataclass(frozen=True)
class StripProbe:
    """One launch of the strip kernel: ``programs`` programs of ``channels`` channels each
    (planes [length, programs * channels]), tiles of ``tile_rows`` rows, ``stages`` tiles
    in flight, ``warps`` warps; program i starts at tile ``i * shift_tiles`` (mod the tiles),
    or at a hash of i when ``scattered``."""

    table: str
    programs: int
    channels: int
    tile_rows: int
    stages: int
    warps: int
    shift_tiles: int = 0
    scattered: bool = False

    @property
    def width(self) -> int:
        return self.programs * self.channels

    @property
    def phase(self) -> str:
        if self.scattered:
            return "scattered"
        return "in step" if self.shift_tiles == 0 else f"shift {self.shift_tiles} tiles"


Probe = StripProbe | Schedule


@dataclass
class ProbeTiming:
    """A probe, its rounds (device ms, in the order they ran), their median and the rate."""

    probe: Probe
    length: int
    rounds_ms: list[float]
    median_ms: float
    gbps: float


def probe_bytes(probe: Probe, length: int, element_size: int = 2) -> int:
    """Bytes one launch moves: x and y read, the product written (a schedule's: its tiles')."""
    if isinstance(probe, Schedule):
        return 3 * probe.tiles * probe.tile_rows * probe.channels * element_size
    return 3 * length * probe.width * element_size


def _refuse_bad_planes(
    width: int, tile_rows: int, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor
) -> None:
    """Raise ValueError unless x, y, out are [L, width], contiguous, one dtype and device, L a
    multiple of ``tile_rows``, fewer than MAX_ELEMENTS elements."""
    if x.dim() != 2 or x.shape[1] != width or x.shape[0] % tile_rows:
        raise ValueError(
            f"x: expected [L, {width}] with L a multiple of {tile_rows}, got {list(x.shape)}"
        )
    if x.numel() > MAX_ELEMENTS:
        raise ValueError(
            f"x: at most {MAX_ELEMENTS} elements (the kernel's int32 offsets), got {x.numel()}"
        )
    for name, tensor in (("x", x), ("y", y), ("out", out)):
        if tensor.shape != x.shape or tensor.dtype != x.dtype or tensor.device != x.device:
            raise ValueError(
                f"{name}: expected x's shape, dtype and device {list(x.shape)}, {x.dtype}, "
                f"{x.device}; got {list(tensor.shape)}, {tensor.dtype}, {tensor.device}"
            )
        if not tensor.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor")


def stream_strips(probe: StripProbe, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    """out = x * y through ``probe``'s launch. x, y, out: [L, probe.width], contiguous, one
    dtype (bf16 or fp32) and device, L a multiple of ``probe.tile_rows``, fewer than
    MAX_ELEMENTS elements; out is written in place.

    Raises:
        ValueError: naming the tensor that breaks one of these."""
    _refuse_bad_planes(probe.width, probe.tile_rows, x, y, out)
    length, width = x.shape
    strip_kernel[(probe.programs,)](
        x, y, out, width, probe.channels, probe.tile_rows, length // probe.tile_rows,
        probe.shift_tiles, probe.scattered, probe.stages, num_warps=probe.warps,
    )  # fmt: skip


@lru_cache(maxsize=64)
def _device_segment_table(schedule: Schedule, device: torch.device) -> torch.Tensor:
    """:func:`schedules.segment_table` on ``device``, built once: a CUDA graph captured over
    the launch replays it with this table's memory, and no host copy may run while one is
    being captured."""
    return segment_table(schedule, device)


def stream_schedule(
    schedule: Schedule, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor
) -> None:
    """out = x * y on the tiles of ``schedule``'s segments (the rest of out untouched). x, y,
    out as :func:`stream_strips` takes them, [L, schedule.width], with every segment's
    tiles inside L; through the Tensor Memory Accelerator (``schedule.described``) only on
    an sm_90 GPU or the interpreter.

    Raises:
        ValueError: naming the tensor or the schedule that breaks one of these."""
    _refuse_bad_planes(schedule.width, schedule.tile_rows, x, y, out)
    n_tiles = x.shape[0] // schedule.tile_rows
    if schedule.reach > n_tiles:
        raise ValueError(
            f"x: the schedule {schedule.name!r} streams {schedule.reach} tiles of "
            f"{schedule.tile_rows} rows, x has {n_tiles}"
        )
    if schedule.described and not tma_device(x.device):
        raise ValueError(
            f"schedule: {schedule.name!r} loads through the Tensor Memory Accelerator, which "
            f"{x.device} lacks (an sm_90 GPU or the Triton interpreter has it)"
        )
    boxes = [schedule.tile_rows, schedule.channels]
    x_boxes = TensorDescriptor.from_tensor(x, boxes) if schedule.described else x
    y_boxes = TensorDescriptor.from_tensor(y, boxes) if schedule.described else y
    table = _device_segment_table(schedule, x.device)
    schedule_kernel[(schedule.programs,)](
        x, y, out, x_boxes, y_boxes, table, schedule.width, schedule.channels,
        schedule.tile_rows, table.shape[1], schedule.stages, schedule.described,
        num_warps=schedule.warps,
    )  # fmt: skip


def phase_probes(length: int = MEDIUM_LENGTH) -> list[StripProbe]:
    """The medium shape's planes in 8-, 16- and 32-channel strips (tiles of 64 rows, three in
    flight, 4 warps), in step, shifted by 1, 8 and a fifth of the strip's tiles per program
    (:data:`BALANCED_SHARE_OFFSET`), and scattered."""
    tiles = length // 64
    probes = []
    for channels in (8, 16, 32):
        for shift in (0, 1, 8, max(1, round(BALANCED_SHARE_OFFSET * tiles))):
            probes.append(StripProbe("phases", MEDIUM_WIDTH // channels, channels, 64, 3, 4, shift))
        probes.append(StripProbe("phases", MEDIUM_WIDTH // channels, channels, 64, 3, 4, 0, True))
    return probes


def grid_probes(multiprocessors: int) -> list[StripProbe]:
    """16-channel strips on one program per SM, the medium shape's 160 programs, two per SM
    and 320, each at five pipeline depths (tile rows x stages x warps), in step and
    scattered."""
    depths = ((64, 3, 4), (128, 3, 4), (256, 3, 4), (128, 4, 4), (256, 3, 8))
    probes = []
    for programs in (multiprocessors, MEDIUM_WIDTH // 16, 2 * multiprocessors, 320):
        for tile_rows, stages, warps in depths:
            for scattered in (False, True):
                probes.append(
                    StripProbe("grids", programs, 16, tile_rows, stages, warps, 0, scattered)
                )
    return probes


def _stream(probe: Probe, x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    if isinstance(probe, Schedule):
        stream_schedule(probe, x, y, out)
    else:
        stream_strips(probe, x, y, out)


def time_probes(
    probes: Sequence[Probe], device: torch.device, length: int, rounds: int
) -> list[ProbeTiming]:
    """Each probe's median device ms over ``rounds`` interleaved rounds (bf16 planes of
    ``length`` rows, one set per width, filled with random values)."""
    from triton.testing import do_bench_cudagraph  # noqa: PLC0415 (GPU only)

    planes: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
    for width in sorted({probe.width for probe in probes}):
        x = torch.randn(length, width, device=device, dtype=torch.bfloat16)
        planes[width] = (x, torch.randn_like(x), torch.empty_like(x))
    times: dict[Probe, list[float]] = {probe: [] for probe in probes}
    for order in interleaved_rounds(list(times), rounds):
        for probe in order:
            x, y, out = planes[probe.width]
            ms = do_bench_cudagraph(lambda p=probe, x=x, y=y, o=out: _stream(p, x, y, o))
            times[probe].append(float(ms))
    timings = []
    for probe, rounds_ms in times.items():
        median = statistics.median(rounds_ms)
        gbps = probe_bytes(probe, length) / (median * 1e-3) / 1e9
        timings.append(ProbeTiming(probe, length, rounds_ms, median, gbps))
    return timings


def _format(timing: ProbeTiming, copy_gbps: float) -> str:
    probe = timing.probe
    rate = (
        f"{timing.median_ms:8.4f} ms {timing.gbps:6.0f} GB/s {100 * timing.gbps / copy_gbps:5.1f} %"
    )
    if isinstance(probe, Schedule):
        geometry = (
            f"{probe.programs:4d} programs {probe.tile_rows:3d} rows x {probe.stages} stages, "
            f"{probe.warps} warps, {probe.loads}"
        )
        busiest = probe.busiest_tiles * probe.tile_rows / timing.length
        return f"{geometry:50s} {probe.name:30s} busiest {busiest:5.3f} strips {rate}"
    geometry = (
        f"{probe.programs:4d} x {probe.channels}ch  {probe.tile_rows:3d} rows x {probe.stages}"
        f" stages, {probe.warps} warps"
    )
    return f"{geometry:40s} {probe.phase:16s} {rate}"


def _record(timing: ProbeTiming) -> dict[str, Any]:
    """A timing as the result file holds it (a schedule's segments as its tile counts)."""
    probe = timing.probe
    if isinstance(probe, Schedule):
        settings = {key: value for key, value in asdict(probe).items() if key != "segments"}
        layout = {
            "table": probe.table,
            "programs": probe.programs,
            "tiles": probe.tiles,
            "busiest_tiles": probe.busiest_tiles,
        }
        return {**asdict(timing), "probe": {**settings, **layout}}
    return {**asdict(timing), "phase": probe.phase, "width": probe.width}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m samu_kernels.strip_probe", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument(
        "--length",
        type=int,
        default=MEDIUM_LENGTH,
        help=f"rows of every plane, a multiple of 256 (default {MEDIUM_LENGTH})",
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--table",
        action="append",
        choices=TABLES,
        help="a table to time (repeat for several; default all: " + ", ".join(TABLES) + ")",
    )
    add_result_file_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m samu_kernels.strip_probe [--out strips.json]``."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.length < 256 or args.length % 256:
        parser.error(f"--length must be a positive multiple of 256, got {args.length}")
    refuse_too_few_rounds(parser, args.rounds)
    refuse_unwritable_result_file(parser, args.out, force=args.force)
    if not torch.cuda.is_available():
        print("samu_kernels.strip_probe needs a CUDA GPU")
        return 2
    device = torch.device("cuda")
    multiprocessors = torch.cuda.get_device_properties(device).multi_processor_count
    tables = args.table or list(TABLES)
    candidates: list[Probe] = [
        *phase_probes(args.length),
        *grid_probes(multiprocessors),
        *schedule_probes(multiprocessors, args.length, MEDIUM_WIDTH, described=tma_device(device)),
    ]
    probes = [probe for probe in candidates if probe.table in tables]
    widest = max(probe.width for probe in probes)
    if args.length * widest > MAX_ELEMENTS:
        print(
            f"--length {args.length}: planes of {widest} channels would pass "
            f"{MAX_ELEMENTS} elements; at most {MAX_ELEMENTS // widest} rows on this GPU"
        )
        return 2
    copy_gbps = measure_copy_bandwidth(device)
    try:
        timings = time_probes(probes, device, args.length, args.rounds)
    except torch.cuda.OutOfMemoryError:
        print(f"--length {args.length}: the planes do not fit in the GPU's memory")
        return 1
    name = torch.cuda.get_device_name(device)
    print(
        f"x * y in strips of bf16 planes of {args.length} rows on {name} "
        f"({multiprocessors} SMs; copy {copy_gbps:.0f} GB/s):"
    )
    for table in tables:
        print(f"-- {table}")
        for timing in timings:
            if timing.probe.table == table:
                print(_format(timing, copy_gbps))
    if args.out is not None:
        document = {
            **provenance(device),
            "copy_gbps": copy_gbps,
            "length": args.length,
            "rounds": args.rounds,
            "probes": [_record(timing) for timing in timings],
        }
        args.out.write_text(json.dumps(document, indent=2))
    return 0
