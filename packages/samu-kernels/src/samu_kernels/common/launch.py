"""Launchers of the scan kernels: buffer allocation, block sizes, grids and passes.

A :class:`ScanConfig` holds what the kernels specialise on (gate mode, output mode and the
backend's features); ``geometry.choose_tile`` picks the launch geometry (overridable with
the ``SAMU_KERNELS_TILE`` environment variable). The launchers take the kernels through a
``wrap`` callable so that the custom ops can pass :func:`torch.library.wrap_triton`
(traceable by ``torch.compile``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import Any

import torch
import triton
from torch._subclasses.fake_tensor import is_fake
from triton.tools.tensor_descriptor import TensorDescriptor

from samu_kernels.backends import BackendSpec
from samu_kernels.common import kernels, persistent, split
from samu_kernels.common.channels_first import time_tile
from samu_kernels.common.chunk import INLINE_ASSEMBLY, SFU_TANH_SIGMOIDS, TANH_SIGMOID
from samu_kernels.common.geometry import (
    CHANNELS_PER_WARP,
    COLUMNS_PER_THREAD,
    LOOKBACK_RUNS,
    LOOKBACK_SCAN_ROWS,
    MAX_ELEMENTS_PER_THREAD,
    MAX_PREFIX_TILE_ELEMENTS,
    MIN_BLOCK_R,
    TILE_ENV,
    Tile,
    choose_tile,
)

__all__ = [
    "BackwardResult",
    "ForwardResult",
    "GateMode",
    "OutMode",
    "ScanConfig",
    "launch_backward",
    "launch_forward",
    "new_buffer",
    "scan_config",
    "tile_sources",
]

TMA_BOX_LIMIT = 256
"""Most elements along any dimension of a box the Tensor Memory Accelerator copies."""
TMA_ALIGNMENT = 16
"""Bytes to which a tensor's start and its strides but the last must be aligned for it."""
SHARED_MEMORY_PER_BLOCK = 232_448
"""Bytes of shared memory one block of an sm_90 GPU may have (the H100's and H200's opt-in
maximum); Triton refuses to load a kernel that needs more."""
TMA_RESERVED_SHARED_MEMORY = 8_192
"""Shared memory a time-split kernel holds beside its boxes (barriers and Triton's scratch:
2-5 KB compiled for sm_90)."""

Wrap = Callable[[Any], Any]


class GateMode(IntEnum):
    """How the kernel obtains the step's decay and input (see ``common/chunk.py``)."""

    PRECOMPUTED = 0
    RGLRU = 1
    SAMU = 2


class OutMode(IntEnum):
    """What the kernel writes as output: h, y*h or y*(h + skip*u)."""

    H = 0
    Y_H = 1
    Y_H_SKIP = 2


@dataclass(frozen=True)
class ScanConfig:
    """The kernels' specialisation. ``group`` is the prefix group size (1: sequential).
    ``channels_first``: the sequences are [B, R, L] and run on ``channels_first.py``'s
    kernels (the scan scheme of ``chunk``, ``hierarchical``, ``group`` and ``fused_write``
    is the [B, L, R] kernels')."""

    gate_mode: GateMode
    out_mode: OutMode
    chunk: int
    hierarchical: bool
    group: int
    fused_write: bool
    shared_sfu: bool
    channels_first: bool = False

    def as_list(self) -> list[int]:
        """The config as the custom ops' ``int[]`` argument."""
        return [
            int(self.gate_mode),
            int(self.out_mode),
            self.chunk,
            int(self.hierarchical),
            self.group,
            int(self.fused_write),
            int(self.shared_sfu),
            int(self.channels_first),
        ]

    @classmethod
    def from_list(cls, values: list[int]) -> ScanConfig:
        """Inverse of :meth:`as_list`."""
        gate, out, chunk, hierarchical, group, fused_write, shared_sfu, channels_first = values
        return cls(
            GateMode(gate),
            OutMode(out),
            chunk,
            bool(hierarchical),
            group,
            bool(fused_write),
            bool(shared_sfu),
            bool(channels_first),
        )

    @property
    def num_partials(self) -> int:
        """Rows of parameter-gradient partial sums per program (see ``store_partials``)."""
        return 7 if self.gate_mode == GateMode.SAMU else 1

    @property
    def channel_rows(self) -> int:
        """Per-channel parameter rows the kernels read: a_param, w_a, w_x (SAMU's gates) or
        a_param (RG-LRU's); none with precomputed gates."""
        return {GateMode.SAMU: 3, GateMode.RGLRU: 1}.get(self.gate_mode, 0)

    @property
    def has_scalars(self) -> bool:
        """Whether the kernels read the four scalars (b_a, b_x, log_c, skip): SAMU's gates,
        or precomputed gates with the y*(h + skip*u) output (which reads skip)."""
        return self.gate_mode == GateMode.SAMU or (
            self.gate_mode == GateMode.PRECOMPUTED and self.out_mode == OutMode.Y_H_SKIP
        )


def split_parameters(
    parameters: torch.Tensor | None, config: ScanConfig, width: int
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The kernels' two parameter arguments, as views of the packed parameters (or of their
    gradient): ([channel_rows, R] rows, [4] scalars), None for what the mode does not read.

    Args:
        parameters: [channel_rows * R (+ 4 with scalars)] fp32 (see :func:`custom_ops.scan`),
            or None (or empty) where the mode reads none.
        config: the kernels' specialisation (which parameters it reads).
        width: R.
    """
    if parameters is None or parameters.numel() == 0:
        return None, None
    rows = config.channel_rows * width
    channel = parameters[:rows].view(config.channel_rows, width) if rows else None
    scalars = parameters[rows:] if config.has_scalars else None
    return channel, scalars


def scan_config(
    spec: BackendSpec, gate_mode: GateMode, out_mode: OutMode, *, channels_first: bool = False
) -> ScanConfig:
    """The kernel specialisation of a Triton backend for one gate and output mode, on
    [B, L, R] sequences or ``channels_first`` ones ([B, R, L])."""
    if spec.chunk is None:
        raise ValueError(f"backend {spec.name!r} is not a Triton backend")
    return ScanConfig(
        gate_mode=gate_mode,
        out_mode=out_mode,
        chunk=spec.chunk,
        hierarchical=spec.hierarchical,
        group=spec.grouped_prefix or 1,
        fused_write=spec.fused_write,
        shared_sfu=spec.shared_sfu,
        channels_first=channels_first,
    )


@lru_cache(maxsize=16)
def _multiprocessors(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 4  # the interpreter: small tiles, several channel blocks


def _segments(warps: int, rows: int, block_r: int) -> int:
    """Segments of a time-split tile of ``rows`` rows and ``block_r`` channels on ``warps``
    warps: one tile column per thread, at most one row each."""
    return min(rows, max(1, warps * CHANNELS_PER_WARP * COLUMNS_PER_THREAD // block_r))


@dataclass(frozen=True)
class _Geometry:
    """Sizes of one launch: the problem, its chunks and runs, and the tile."""

    batch: int
    length: int
    width: int
    n_chunks: int
    n_runs: int
    n_rb: int
    tile: Tile

    @classmethod
    def of(cls, u: torch.Tensor, config: ScanConfig) -> _Geometry:
        batch, length, width = u.shape
        multiprocessors = _multiprocessors(u.device)
        tile = choose_tile(
            batch,
            length,
            width,
            config.chunk,
            hierarchical=config.hierarchical,
            multiprocessors=multiprocessors,
            light_passes=config.gate_mode == GateMode.RGLRU,
            tma_loads=config.gate_mode == GateMode.SAMU,
            even_grid=config.gate_mode == GateMode.RGLRU,
        )
        time_split_keys = (
            ("channels", tile.channels),
            ("programs", tile.programs),
            ("pieces", tile.pieces),
        )
        for key, value in time_split_keys:
            if value and (config.hierarchical or not tile.split):
                raise ValueError(
                    f"{TILE_ENV}: {key}={value} needs time-split programs (split > 0 and a "
                    "name without hierarchical)"
                )
        if tile.programs > multiprocessors and tile.pieces > 1:
            raise ValueError(
                f"{TILE_ENV}: programs={tile.programs} with pieces={tile.pieces} runs persistent "
                "programs that wait for each other's pieces, so all must be resident at once: "
                f"at most {multiprocessors} (one per multiprocessor of this GPU)"
            )
        if tile.channels > tile.block_r:
            raise ValueError(
                f"{TILE_ENV}: channels={tile.channels} exceeds the program's lanes "
                f"(block_r={tile.block_r}): give a block_r of at least that many"
            )
        n_chunks = triton.cdiv(length, config.chunk)
        return cls(
            batch,
            length,
            width,
            n_chunks,
            triton.cdiv(n_chunks, tile.chunks_per_program),
            triton.cdiv(width, tile.program_channels),
            tile,
        )

    @property
    def n_blocks(self) -> int:
        """(batch row, channel block) pairs: the time-split programs, unless balanced."""
        return self.batch * self.n_rb

    @property
    def balanced(self) -> bool:
        """Whether the time-split programs are fewer than the channel blocks
        (``Tile.programs``, which :meth:`of` allows with time-split programs only), each
        scanning a contiguous share of their tiles."""
        return 0 < self.tile.programs < self.n_blocks and not self.persistent

    @property
    def persistent(self) -> bool:
        """Whether the time-split programs are persistent (``Tile.programs`` with
        ``Tile.pieces``): at most that many programs take the blocks' pieces round-robin
        (``persistent.py``)."""
        return self.tile.programs > 0 and self.tile.pieces > 1

    def pieces(self, tile_rows: int) -> tuple[int, int]:
        """(pieces, tiles per piece) of each block of a time-split direction whose tiles have
        ``tile_rows`` rows: ``Tile.pieces`` pieces of whole tiles, fewer where the blocks
        have fewer tiles (no piece is empty); (1, its tiles) for whole blocks."""
        n_tiles = triton.cdiv(self.length, tile_rows)
        per_piece = triton.cdiv(n_tiles, max(1, self.tile.pieces))
        return triton.cdiv(n_tiles, per_piece), per_piece

    def partial_rows_per_block(self, tile_rows: int) -> int:
        """The parameter-gradient partial rows the time-split backward (tiles of
        ``tile_rows`` rows) writes per (batch row, channel block): two for balanced shares,
        one per piece (:meth:`pieces`; one for whole blocks)."""
        return 2 if self.balanced else self.pieces(tile_rows)[0]

    def split_handover(
        self, like: torch.Tensor, tile_rows: int
    ) -> tuple[int, tuple[Any, ...], dict[str, Any]]:
        """(programs, trailing arguments, constexpr) of a time-split launch whose tiles have
        ``tile_rows`` rows: the arguments CARRY, L, R, n_chunks, n_blocks and
        tiles_per_piece, and HANDOVER (``split.WHOLE_BLOCKS`` etc., as ints). CARRY holds
        flagged carry words (int64, zeroed; ``summaries.publish_carry``): balanced, the
        blocks' [B, R]; in pieces (:meth:`pieces`), the pieces' [pieces, B, R] and the ticket
        after them, one program per piece; persistent (:attr:`persistent`), the pieces'
        without the ticket, at most ``Tile.programs`` programs and no HANDOVER
        (``persistent.py``'s kernels), FULL_TILES off where the last piece is shorter; else
        one program per block and ``like`` for CARRY (never read)."""
        sizes = (self.length, self.width, self.n_chunks, self.n_blocks)
        n_pieces, per_piece = self.pieces(tile_rows)
        if self.persistent:
            programs = min(self.tile.programs, n_pieces * self.n_blocks)
            if (
                not INLINE_ASSEMBLY
                and programs < n_pieces * self.n_blocks
                and self.n_blocks % programs
            ):
                # The interpreter runs the programs one after another: a piece may only wait
                # for a piece of its own program, or of one with a lower id.
                raise ValueError(
                    f"{TILE_ENV}: programs={self.tile.programs} with pieces={self.tile.pieces} "
                    "under the interpreter (TRITON_INTERPRET=1), which runs programs one after "
                    "another, would wait forever for a later program's piece: give programs "
                    f"dividing the {self.n_blocks} channel blocks (batch rows x blocks)"
                )
            carry = zeroed_buffer(like, (n_pieces, self.batch, self.width), torch.int64)
            handover = (carry, *sizes, per_piece)
            # A shorter last piece is scanned as a whole one whose tiles past the end hold
            # rows past L only (masked).
            uneven = (
                {"FULL_TILES": False} if triton.cdiv(self.length, tile_rows) % per_piece else {}
            )
            return programs, handover, uneven
        if self.balanced:
            carry = zeroed_buffer(like, (self.batch, self.width), torch.int64)
            return (
                self.tile.programs,
                (carry, *sizes, 0),
                {"HANDOVER": split.BALANCED_SHARES.value},
            )
        if n_pieces > 1:
            carry = zeroed_buffer(like, (n_pieces * self.batch * self.width + 1,), torch.int64)
            handover = (carry, *sizes, per_piece)
            return n_pieces * self.n_blocks, handover, {"HANDOVER": split.BLOCK_PIECES.value}
        return self.n_blocks, (like, *sizes, 0), {"HANDOVER": split.WHOLE_BLOCKS.value}

    def scratch(self, like: torch.Tensor, config: ScanConfig, n_programs: int) -> torch.Tensor:
        """The fused_write backward's per-program [T, BLOCK_R] fp32 rows of recomputed
        states ([n_programs, T, BLOCK_R]); ``like`` itself when nothing is recomputed."""
        if not config.fused_write:
            return like
        return new_buffer(like, (n_programs, config.chunk, self.tile.block_r), torch.float32)

    def split_layout(self, config: ScanConfig, *, forward_warps: bool) -> tuple[int, int, int]:
        """(warps, TILE rows, SEGMENTS) of the time-split programs of one direction: tiles of
        ``tile_rows`` (at least the chunk) on ``split`` warps, in as many segments as put
        ``COLUMNS_PER_THREAD`` (one) tile column on every thread (each warp holds whole
        segments, and a thread all the rows of its column); with ``forward_warps`` (the
        forward's tiles through the TMA, :meth:`forward_sources`) and ``forward_split``, on
        that many warps and tiles as many times longer, so that its
        segments have the backward's rows and its states (the checkpoints the backward
        starts from, then recomputed) are the backward's bit for bit. Raises ValueError
        naming ``SAMU_KERNELS_TILE`` where a thread would hold more than
        MAX_ELEMENTS_PER_THREAD elements of an input or the two directions' segments would
        differ."""
        warps = self.tile.split
        rows = max(self.tile.tile_rows, config.chunk)
        segments = _segments(warps, rows, self.tile.block_r)
        if self.tile.forward_split and forward_warps:
            backward_rows = rows // segments
            warps = self.tile.forward_split
            rows = rows * warps // self.tile.split
            segments = _segments(warps, rows, self.tile.block_r)
            if rows < config.chunk or rows // segments != backward_rows:
                raise ValueError(
                    f"{TILE_ENV}: fwd_split={warps} gives the forward segments of "
                    f"{rows // segments} rows in tiles of {rows}, the backward's have "
                    f"{backward_rows} and a tile holds whole chunks of {config.chunk}: raise "
                    "fwd_split or tile_rows"
                )
        elements = rows * self.tile.block_r // (warps * CHANNELS_PER_WARP)
        if elements > MAX_ELEMENTS_PER_THREAD:
            raise ValueError(
                f"{TILE_ENV}: a tile of {rows} rows (tile_rows, at least the chunk) of "
                f"block_r={self.tile.block_r} channels on {warps} warps (split, or the "
                f"forward's fwd_split) gives each thread {elements} elements of every input "
                f"({rows // segments} rows); at most {MAX_ELEMENTS_PER_THREAD}: raise split, "
                "or lower block_r or tile_rows"
            )
        return warps, rows, segments

    def split_flags(
        self, config: ScanConfig, *, has_resets: bool, dtype: torch.dtype, forward_warps: bool
    ) -> dict[str, Any]:
        """The constexprs and launch options of the time-split sequential kernels of one
        direction (:meth:`split_layout`). With ``shared_sfu``, inputs of a 16-bit ``dtype``
        take their gates' sigmoids from ``tanh.approx`` (``chunk.TANH_SIGMOID``)."""
        warps, rows, segments = self.split_layout(config, forward_warps=forward_warps)
        return {
            "GATE_MODE": int(config.gate_mode),
            "OUT_MODE": int(config.out_mode),
            "T": config.chunk,
            "TILE": rows,
            "SEGMENTS": segments,
            "BLOCK_R": self.tile.block_r,
            "CHANNELS": self.tile.program_channels,
            "SHARED_SFU": shared_sfu_flag(config, dtype),
            "HAS_RESETS": has_resets,
            "FULL_TILES": self.length % rows == 0,
            "num_warps": warps,
        }

    def forward_sources(
        self, config: ScanConfig, tensors: Sequence[torch.Tensor], *, has_resets: bool
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The time-split forward's tiled inputs (``tensors``: U, GATE_X, GATE_A, Y, RESET, as
        :func:`tile_sources`) and its flags: on ``forward_split`` warps where its tiles come
        through the TMA, else on ``split`` (pointer loads hold the next tile in registers
        too: 153 per thread at 8 warps of the medium shape's tiles, one program per SM; the
        forward's own warps were timed with the TMA only)."""
        dtype = tensors[0].dtype
        flags = self.split_flags(config, has_resets=has_resets, dtype=dtype, forward_warps=True)
        sources, load_flags = tile_sources(
            tensors, self.tma_stages(config), flags["TILE"], self.tile.block_r, flags["CHANNELS"]
        )
        if not load_flags["DESCRIBED"]:
            flags = self.split_flags(
                config, has_resets=has_resets, dtype=dtype, forward_warps=False
            )
        return sources, flags | load_flags

    def tma_stages(self, config: ScanConfig) -> int:
        """Tiles in flight through the TMA (``Tile.tma``; 0: pointer loads). Precomputed
        gates (SAMU's reference controller, RG-LRU without ``fused``) always take pointers:
        through boxes their kernels compiled to five times the exponentials and a spilling
        backward (Triton 3.6, sm_90: 79 MUFU operations and 72 local-memory instructions
        against 16 and none), and on an H100 their gradients differed from the pointer
        loads' in the low bits where the fused gates' are bit for bit the same."""
        return 0 if config.gate_mode == GateMode.PRECOMPUTED else self.tile.tma

    def run_lookback(self, config: ScanConfig) -> bool:
        """Whether the chained kernels run with a look-back over run summaries instead of the
        chain (``lookback=2``; names with ``grouped_prefix`` only)."""
        return config.hierarchical and self.tile.lookback == LOOKBACK_RUNS and config.group > 1

    def flags(self, config: ScanConfig, *, has_resets: bool, backward: bool) -> dict[str, Any]:
        """The constexprs and launch options shared by the chunk kernels."""
        return {
            "GATE_MODE": int(config.gate_mode),
            "OUT_MODE": int(config.out_mode),
            "T": config.chunk,
            "UNROLL": min(config.chunk, self.tile.unroll),
            "BLOCK_R": self.tile.block_r,
            "SHARED_SFU": config.shared_sfu,
            "HAS_RESETS": has_resets,
            "FULL_CHUNKS": self.length % config.chunk == 0,
            "NUM_STAGES": self.tile.num_stages,
            "PREFETCH": self.tile.prefetch if INLINE_ASSEMBLY else 0,
            "num_warps": self.tile.backward_warps if backward else self.tile.num_warps,
        }


@dataclass(frozen=True)
class ForwardResult:
    """Forward outputs: output [B, L, R] (u's dtype), final state [B, R] fp32, and what the
    backward needs (checkpoints [B, ceil(L/T), R] or all states [B, L, R], fp32)."""

    output: torch.Tensor
    final_state: torch.Tensor
    saved: torch.Tensor


def allocate_forward(u: torch.Tensor, config: ScanConfig) -> ForwardResult:
    """Empty forward outputs (also the fake implementation's)."""
    if config.channels_first:
        batch, width, length = u.shape
        saved_shape = (batch, width, triton.cdiv(length, time_tile(length).steps))
    else:
        batch, length, width = u.shape
        saved_length = triton.cdiv(length, config.chunk) if config.fused_write else length
        saved_shape = (batch, saved_length, width)
    return ForwardResult(
        output=new_buffer(u, tuple(u.shape), u.dtype),
        final_state=new_buffer(u, (batch, width), torch.float32),
        saved=new_buffer(u, saved_shape, torch.float32),
    )


def launch_forward(
    wrap: Wrap,
    u: torch.Tensor,
    *,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    h0: torch.Tensor | None,
    config: ScanConfig,
) -> ForwardResult:
    """Run the forward passes of ``config`` (all tensors contiguous; see ``ops`` modules)."""
    result = allocate_forward(u, config)
    geo = _Geometry.of(u, config)
    channel, scalars = split_parameters(parameters, config, geo.width)
    pointers = [or_placeholder(t, u) for t in (u, gate_x, gate_a, y, channel, scalars, reset)]
    flags = geo.flags(config, has_resets=reset is not None, backward=False)
    sizes = (geo.length, geo.width, geo.n_chunks)
    if not config.hierarchical:
        # Time-split programs (split.py) unless the tile asks for the one-warp row walk.
        handover: tuple[Any, ...] = sizes
        programs = geo.n_blocks
        if geo.tile.split:
            kernel = (
                persistent.forward_persistent_kernel
                if geo.persistent
                else split.forward_split_kernel
            )
            u_, gate_x_, gate_a_, y_, channel_, scalars_, reset_ = pointers
            (u_, gate_x_, gate_a_, y_, reset_), flags = geo.forward_sources(
                config, (u_, gate_x_, gate_a_, y_, reset_), has_resets=reset is not None
            )
            pointers = [u_, gate_x_, gate_a_, y_, channel_, scalars_, reset_]
            programs, handover, balance_flags = geo.split_handover(u, flags["TILE"])
            flags |= balance_flags
        else:
            kernel = kernels.forward_sequential_kernel
        wrap(kernel)[(programs,)](
            *pointers,
            or_placeholder(h0, u),
            result.output,
            result.final_state,
            result.saved,
            *handover,
            HAS_H0=h0 is not None,
            FUSED_WRITE=config.fused_write,
            **flags,
        )
        return result

    runs = (geo.tile.chunks_per_program, geo.n_runs)
    summaries_shape = (geo.batch, geo.n_runs, geo.width)
    grid = (geo.batch * geo.n_rb, geo.n_runs)
    if geo.tile.chained or geo.run_lookback(config):
        chain, n_groups, chain_flags = _chain_arguments(u, geo, config)
        wrap(kernels.forward_chained_kernel)[grid](
            *pointers,
            or_placeholder(h0, u),
            result.output,
            result.final_state,
            result.saved,
            *chain,
            *sizes,
            *runs,
            n_groups,
            HAS_H0=h0 is not None,
            FUSED_WRITE=config.fused_write,
            **chain_flags,
            **flags,
        )
        return result
    sum_a = new_buffer(u, summaries_shape, torch.float32)
    sum_b = new_buffer(u, summaries_shape, torch.float32)
    carry = new_buffer(u, summaries_shape, torch.float32)
    u_, gate_x_, gate_a_, _, channel_, scalars_, reset_ = pointers
    wrap(kernels.run_summary_kernel)[grid](
        u_, gate_x_, gate_a_, channel_, scalars_, reset_, sum_a, sum_b, *sizes, *runs, **flags
    )
    _launch_prefix(
        wrap,
        sum_a,
        sum_b,
        init=h0,
        carry=carry,
        final=result.final_state,
        geo=geo,
        config=config,
        reverse=False,
    )
    wrap(kernels.forward_runs_kernel)[grid](
        *pointers,
        carry,
        result.output,
        result.saved,
        *sizes,
        *runs,
        FUSED_WRITE=config.fused_write,
        **flags,
    )
    return result


def _launch_prefix(
    wrap: Wrap,
    sum_a: torch.Tensor,
    sum_b: torch.Tensor,
    *,
    init: torch.Tensor | None,
    carry: torch.Tensor,
    final: torch.Tensor,
    geo: _Geometry,
    config: ScanConfig,
    reverse: bool,
) -> None:
    block_r = max(MIN_BLOCK_R, min(geo.tile.block_r, MAX_PREFIX_TILE_ELEMENTS // config.group))
    grid = (geo.batch * triton.cdiv(geo.width, block_r),)
    wrap(kernels.prefix_kernel)[grid](
        sum_a,
        sum_b,
        or_placeholder(init, sum_a),
        carry,
        final,
        geo.width,
        geo.n_runs,
        G=config.group,
        BLOCK_R=block_r,
        HAS_INIT=init is not None,
        REVERSE=reverse,
        num_warps=8 if config.group * block_r >= 4096 else 4,
    )


@dataclass(frozen=True)
class BackwardResult:
    """Gradients; an empty tensor stands for an input that has none in this mode.

    d_u, d_y: [B, L, R] in u's dtype. d_gate_x, d_gate_a: the logits' gradients (RG-LRU,
    u's dtype) or those of x and log_a (precomputed, fp32). d_parameters: the packed
    parameters' (:func:`split_parameters` gives its views), d_h0: [B, R] fp32.
    """

    d_u: torch.Tensor
    d_gate_x: torch.Tensor
    d_gate_a: torch.Tensor
    d_y: torch.Tensor
    d_parameters: torch.Tensor
    d_h0: torch.Tensor

    def as_tuple(self) -> tuple[torch.Tensor, ...]:
        """The gradients in the custom op's return order."""
        return (
            self.d_u,
            self.d_gate_x,
            self.d_gate_a,
            self.d_y,
            self.d_parameters,
            self.d_h0,
        )


def allocate_backward(
    u: torch.Tensor,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    parameters: torch.Tensor | None,
    config: ScanConfig,
) -> BackwardResult:
    """Empty gradient buffers (also the fake implementation's)."""

    def none() -> torch.Tensor:
        # A fresh empty tensor each time: custom-op outputs must not alias each other.
        return u.new_empty((0,), dtype=torch.float32)

    def like(tensor: torch.Tensor) -> torch.Tensor:
        return new_buffer(tensor, tuple(tensor.shape), tensor.dtype)

    has_u_grad = config.gate_mode != GateMode.PRECOMPUTED or config.out_mode == OutMode.Y_H_SKIP
    return BackwardResult(
        d_u=like(u) if has_u_grad else none(),
        d_gate_x=like(gate_x) if gate_x is not None else none(),
        d_gate_a=like(gate_a) if gate_a is not None else none(),
        d_y=like(u) if config.out_mode != OutMode.H else none(),
        d_parameters=like(parameters) if parameters is not None else none(),
        d_h0=new_buffer(
            u, (u.shape[0], u.shape[1] if config.channels_first else u.shape[2]), torch.float32
        ),
    )


def launch_backward(
    wrap: Wrap,
    grad_output: torch.Tensor,
    grad_final: torch.Tensor,
    saved: torch.Tensor,
    u: torch.Tensor,
    *,
    gate_x: torch.Tensor | None,
    gate_a: torch.Tensor | None,
    y: torch.Tensor | None,
    parameters: torch.Tensor | None,
    reset: torch.Tensor | None,
    config: ScanConfig,
) -> BackwardResult:
    """Run the backward passes of ``config`` (all tensors contiguous; ``grad_final`` [B, R]
    fp32, or empty where no gradient reached the final state)."""
    grads = allocate_backward(u, gate_x, gate_a, parameters, config)
    geo = _Geometry.of(u, config)
    channel, scalars = split_parameters(parameters, config, geo.width)
    # The time-split and sequential kernels sum their partials themselves, with counters.
    n_counters = 0 if config.hierarchical else geo.n_rb + 1
    grad_final, counters = _zeroed_grad_final_and_counters(u, grad_final, geo, n_counters)
    u_, gate_x_, gate_a_, y_, channel_, scalars_, reset_ = (
        or_placeholder(t, u) for t in (u, gate_x, gate_a, y, channel, scalars, reset)
    )
    outputs = [or_placeholder(g, u) for g in grads.as_tuple()[:4]]
    flags = geo.flags(config, has_resets=reset is not None, backward=True)
    sizes = (geo.length, geo.width, geo.n_chunks)
    inputs = (u_, gate_x_, gate_a_, y_, channel_, scalars_, reset_, grad_output)
    if not config.hierarchical:
        partial_rows = geo.batch  # one per batch row and block; time-split cuts write more
        n_programs = geo.n_blocks
        # Time-split programs (split.py) keep a tile's states in registers; the row walk
        # rereads a recomputed chunk from its scratch rows.
        saved_: Any = saved
        handover: tuple[Any, ...] = sizes
        if geo.tile.split:
            kernel = (
                persistent.backward_persistent_kernel
                if geo.persistent
                else split.backward_split_kernel
            )
            flags = geo.split_flags(
                config, has_resets=reset is not None, dtype=u.dtype, forward_warps=False
            )
            scratch_rows: tuple[torch.Tensor, ...] = ()
            # Without fused_write the saved states are a [B, L, R] input tiled like the rest.
            tiled = (u_, gate_x_, gate_a_, y_, reset_, grad_output, saved)
            sources, load_flags = tile_sources(
                tiled[:-1] if config.fused_write else tiled,
                geo.tma_stages(config),
                flags["TILE"],
                geo.tile.block_r,
                flags["CHANNELS"],
            )
            u_, gate_x_, gate_a_, y_, reset_, grad_output_ = sources[:6]
            saved_ = saved if config.fused_write else sources[6]
            inputs = (u_, gate_x_, gate_a_, y_, channel_, scalars_, reset_, grad_output_)
            n_programs, handover, balance_flags = geo.split_handover(u, flags["TILE"])
            flags |= load_flags | balance_flags
            partial_rows *= geo.partial_rows_per_block(flags["TILE"])
        else:
            kernel = kernels.backward_sequential_kernel
            scratch_rows = (geo.scratch(u, config, n_programs),)
        partial = _partial_buffer(u, partial_rows, geo, config)
        wrap(kernel)[(n_programs,)](
            *inputs,
            grad_final,
            saved_,
            *scratch_rows,
            *outputs,
            grads.d_h0,
            partial,
            counters,
            *(
                or_placeholder(view, u)
                for view in split_parameters(grads.d_parameters, config, geo.width)
            ),
            *handover,
            FUSED_WRITE=config.fused_write,
            **flags,
        )
        return grads

    runs = (geo.tile.chunks_per_program, geo.n_runs)
    summaries_shape = (geo.batch, geo.n_runs, geo.width)
    grid = (geo.batch * geo.n_rb, geo.n_runs)
    # The hierarchical passes' partial rows are summed by torch.sum (see sum_partials).
    partial = new_buffer(u, (geo.batch * geo.n_runs, config.num_partials, geo.width), torch.float32)
    scratch = geo.scratch(u, config, geo.batch * geo.n_rb * geo.n_runs)
    if geo.tile.chained or geo.run_lookback(config):
        chain, n_groups, chain_flags = _chain_arguments(u, geo, config)
        wrap(kernels.backward_chained_kernel)[grid](
            *inputs,
            grad_final,
            saved,
            scratch,
            *outputs,
            grads.d_h0,
            partial,
            *chain,
            *sizes,
            *runs,
            n_groups,
            FUSED_WRITE=config.fused_write,
            **chain_flags,
            **flags,
        )
        sum_partials(partial, grads, config)
        return grads
    sum_a = new_buffer(u, summaries_shape, torch.float32)
    sum_b = new_buffer(u, summaries_shape, torch.float32)
    carry = new_buffer(u, summaries_shape, torch.float32)
    wrap(kernels.reverse_run_summary_kernel)[grid](
        u_,
        gate_a_,
        y_,
        channel_,
        scalars_,
        reset_,
        grad_output,
        sum_a,
        sum_b,
        *sizes,
        *runs,
        **flags,
    )
    _launch_prefix(
        wrap,
        sum_a,
        sum_b,
        init=grad_final,
        carry=carry,
        final=sum_a,
        geo=geo,
        config=config,
        reverse=True,
    )
    wrap(kernels.backward_runs_kernel)[grid](
        *inputs,
        carry,
        saved,
        scratch,
        *outputs,
        grads.d_h0,
        partial,
        *sizes,
        *runs,
        FUSED_WRITE=config.fused_write,
        **flags,
    )
    sum_partials(partial, grads, config)
    return grads


def _partial_buffer(
    like: torch.Tensor, rows: int, geo: _Geometry, config: ScanConfig
) -> torch.Tensor:
    """The backward's parameter-gradient partial sums, reduced inside the kernel
    (``chunk.finish_partials``): ``rows`` rows of [num_partials, R] fp32, then one row of
    [4] scalar sums per channel block."""
    size = rows * config.num_partials * geo.width + geo.n_rb * 4
    return new_buffer(like, (size,), torch.float32)


def _zeroed_grad_final_and_counters(
    like: torch.Tensor, grad_final: torch.Tensor, geo: _Geometry, n_counters: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the final state's gradient [B, R] fp32, ``n_counters`` int32 counters for
    ``chunk.finish_partials``, zeroed): an empty ``grad_final`` becomes zeros, cut from the
    counters' zeroed buffer, so that one fill serves both. Traced by ``torch.compile`` the two
    are separate buffers: Inductor cannot index a dtype view of a slice ("make_reindexer NYI
    on DtypeView", torch 2.11)."""
    if grad_final.numel() == 0 and not is_fake(like):
        n_states = geo.batch * geo.width
        zeros = zeroed_buffer(like, (n_states + n_counters,), torch.float32)
        return zeros[:n_states].view(geo.batch, geo.width), zeros[n_states:].view(torch.int32)
    if grad_final.numel() == 0:
        grad_final = zeroed_buffer(like, (geo.batch, geo.width), torch.float32)
    return grad_final, zeroed_buffer(like, (n_counters,), torch.int32)


def sum_partials(partial: torch.Tensor, grads: BackwardResult, config: ScanConfig) -> None:
    """Deterministic reduction (torch.sum, no atomics) of the hierarchical passes' partial
    sums [rows, num_partials, R] into the parameters' gradient. Their programs are many and
    short, so each waiting for an atomic's answer at its end (``chunk.finish_partials``,
    which the time-split and sequential kernels use) cost more than these kernels: 3-8 %
    (H100, 2026-12-06)."""
    d_channel, d_scalars = split_parameters(grads.d_parameters, config, partial.shape[-1])
    if d_channel is not None:
        torch.sum(partial[:, : config.channel_rows], dim=0, out=d_channel)
    if d_scalars is None:
        return
    if config.gate_mode == GateMode.SAMU:
        torch.sum(partial[:, config.channel_rows :], dim=(0, 2), out=d_scalars)
    else:  # precomputed gates: skip's gradient alone
        d_scalars[:3].zero_()
        torch.sum(partial.reshape(-1), dim=0, out=d_scalars[3])


def new_buffer(like: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Every buffer the launchers hand to a kernel comes from here (tests poison it)."""
    return like.new_empty(shape, dtype=dtype)


def _chain_arguments(
    like: torch.Tensor, geo: _Geometry, config: ScanConfig
) -> tuple[tuple[torch.Tensor, ...], int, dict[str, Any]]:
    """The chained kernels' summary buffers (:func:`_summary_buffers`: the chain uses the run
    states, flags and tickets; the run look-back all of them), the group count and the
    look-back's constexprs (group size G and the summaries it composes at a time)."""
    run_lookback = geo.run_lookback(config)
    # Without the look-back its group constants are unused: one compilation for every G.
    group = config.group if run_lookback else 1
    n_groups = triton.cdiv(geo.n_runs, group) if run_lookback else 1
    constexprs = {
        "LOOK_BACK": run_lookback,
        "G": group,
        "SCAN_ROWS": min(LOOKBACK_SCAN_ROWS, group),
    }
    return _summary_buffers(like, geo, n_groups), n_groups, constexprs


def _summary_buffers(like: torch.Tensor, geo: _Geometry, n_groups: int) -> tuple[torch.Tensor, ...]:
    """Run summaries published across programs, in the chained kernels' argument order:
    decays and states fp32 [B, n_runs, R], the groups' [B, n_groups, R], and zeroed int32
    flags [channel blocks, n_runs], group flags [channel blocks, n_groups] and tickets
    [channel blocks], the three from one zeroed buffer (one memset)."""
    columns = geo.batch * geo.n_rb
    counters = zeroed_buffer(like, (columns * (geo.n_runs + n_groups + 1),), torch.int32)
    groups_start = columns * geo.n_runs
    tickets_start = groups_start + columns * n_groups
    rows = (geo.batch, geo.n_runs, geo.width)
    groups = (geo.batch, n_groups, geo.width)
    return (
        new_buffer(like, rows, torch.float32),
        new_buffer(like, rows, torch.float32),
        new_buffer(like, groups, torch.float32),
        new_buffer(like, groups, torch.float32),
        counters[:groups_start],
        counters[groups_start:tickets_start],
        counters[tickets_start:],
    )


def zeroed_buffer(like: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A buffer a kernel needs zeroed (flags, carry words, tickets and counters)."""
    return like.new_zeros(shape, dtype=dtype)


def tile_sources(
    tensors: Sequence[torch.Tensor], stages: int, rows: int, block_r: int, channels: int
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The tiled inputs of the time-split kernels and their load flags.

    ``tensors`` are [B, L, R] inputs and [B, L] document-start flags (placeholders
    included). With ``stages`` > 0 (``Tile.tma``), where every [B, L, R] tensor can be copied
    by the Tensor Memory Accelerator (:func:`tma_loadable`), returns host-side tensor
    descriptors of their [1, rows, block_r] boxes (one every ``channels`` channels), the
    flags as they are (the kernels read them through pointers, ``tiles.load_tile_boxes``),
    and ``DESCRIBED`` with ``TILE_STAGES`` = ``stages``, or fewer where that many tiles'
    boxes would not fit a block's shared memory (:func:`tma_stages_that_fit`; pointer loads
    where fewer than two fit); otherwise the tensors themselves, loaded through
    pointers, and no pipeline depth for the tile loop (``TILE_STAGES`` None: Triton's
    default). A launch traced by ``torch.compile`` (fake tensors) takes pointers: its graph
    cannot hold host-side descriptors (Inductor hashes their fake base tensors, torch 2.11).
    """
    tiled = [t for t in tensors if t.dim() == 3]
    traced = any(is_fake(t) for t in tensors)
    stages = tma_stages_that_fit(stages, rows * block_r * sum(t.element_size() for t in tiled))
    if stages and not traced and all(tma_loadable(t, rows, block_r, channels) for t in tiled):
        boxes = tuple(
            TensorDescriptor.from_tensor(t, [1, rows, block_r]) if t.dim() == 3 else t
            for t in tensors
        )
        return boxes, {"DESCRIBED": True, "TILE_STAGES": stages}
    return tuple(tensors), {"DESCRIBED": False, "TILE_STAGES": None}


def tma_stages_that_fit(stages: int, tile_bytes: int) -> int:
    """``stages``, or the most tiles in flight that fit an sm_90 block's shared memory where
    that is fewer; 0 (pointer loads) where fewer than two fit. ``tile_bytes``: a box of every
    tiled tensor, placeholders included (an upper bound: a kernel loads the boxes it uses).
    Triton's pipeline keeps ``stages - 1`` tiles' boxes in shared memory beside a few KB of
    its own: compiled for sm_90, SAMU's backward, three [256, 16] boxes a tile, took 78,936
    bytes at 4 stages and 104,544 at 5 in bf16, 202,848 at 5 and, at 6, 253,064 (more than
    a block may have) in fp32."""
    fit = 1 + (SHARED_MEMORY_PER_BLOCK - TMA_RESERVED_SHARED_MEMORY) // max(tile_bytes, 1)
    depth = min(stages, fit)
    return depth if depth >= 2 else 0


def tma_loadable(tensor: torch.Tensor, rows: int, block_r: int, channels: int) -> bool:
    """Whether [1, rows, block_r] boxes of the contiguous [B, L, R] ``tensor``, one every
    ``channels`` channels, can be copied by the Tensor Memory Accelerator: its device has one
    (:func:`tma_device`), box sides of at most TMA_BOX_LIMIT, a start and strides aligned to
    TMA_ALIGNMENT bytes, and box rows and box starts within a row of a multiple of it (box
    starts: Triton's rule for descriptor-load offsets, asserted by its interpreter)."""
    if not tma_device(tensor.device):
        return False
    size = tensor.element_size()
    start = tensor.storage_offset() * size if is_fake(tensor) else tensor.data_ptr()
    return bool(
        tensor.is_contiguous()
        and max(rows, block_r) <= TMA_BOX_LIMIT
        and start % TMA_ALIGNMENT == 0
        and all(stride * size % TMA_ALIGNMENT == 0 for stride in tensor.stride()[:-1])
        and block_r * size % TMA_ALIGNMENT == 0
        and channels * size % TMA_ALIGNMENT == 0
    )


@lru_cache(maxsize=16)
def tma_device(device: torch.device) -> bool:
    """Whether kernels on ``device`` can load through the Tensor Memory Accelerator: a CUDA
    GPU of compute capability 9 or newer, or the Triton interpreter, which emulates it."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device)[0] >= 9
    return os.environ.get("TRITON_INTERPRET") == "1"


def shared_sfu_flag(config: ScanConfig, dtype: torch.dtype) -> int:
    """The kernels' SHARED_SFU constexpr: with ``shared_sfu``, inputs of a 16-bit ``dtype``
    take their gates' sigmoids from ``tanh.approx`` (``chunk.TANH_SIGMOID``). A plain int:
    torch.compile writes the launch's constants into Python source."""
    if config.shared_sfu and TANH_SIGMOID and dtype.itemsize == 2:
        return int(SFU_TANH_SIGMOIDS.value)
    return int(config.shared_sfu)


def or_placeholder(tensor: torch.Tensor | None, fallback: torch.Tensor) -> torch.Tensor:
    """A tensor for a pointer argument the kernel does not read when ``tensor`` is None."""
    return fallback if tensor is None else tensor
