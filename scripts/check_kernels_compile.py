"""Compile every Triton scan kernel the ops launch for a Hopper GPU (sm_90), on a CPU.

Nothing is launched: ``JITFunction`` launches are intercepted, the signature is built from
the actual arguments and ``triton.compile`` runs for a CUDA sm_90 target (ptxas included),
so a kernel that would fail to compile on the H200 fails here, and so does one that needs
more shared memory than an sm_90 block may have (Triton would refuse to load it). It also
fails a scan kernel whose PTX interleaves row loads with row stores
(:func:`store_then_load_count`): each row would then wait for DRAM (measured: ~1.5 us per
row on the H200). Each backend runs forward and backward on a tiny problem for both
architectures it supports, bf16 and fp32, with and without resets and an initial state (and,
for SAMU, every controller).

Usage::

    uv run --frozen python scripts/check_kernels_compile.py [--backend NAME ...] [--stats]
        [--shape B,L,R] [--loads pointers|descriptors] [--channels-first]

``--stats`` also prints, per kernel, its registers per thread (cuobjdump), its shared memory
per block and its SASS instruction mix (Triton's ``get_sass``): every instruction, those of
the first loop (a time-split kernel's tile loop, :func:`first_loop_instructions`), the
special-function (MUFU) ones and the global loads and stores, the numbers behind
docs/kernels.md's instruction floor. ``--shape`` compiles at another problem size (default
2,40,24); with ``SAMU_KERNELS_TILE`` that reproduces a GPU geometry. ``--loads descriptors``
compiles the time-split kernels with their tiles through the Tensor Memory Accelerator
(``tma`` = ``geometry.TMA_STAGES`` added to the geometry unless ``SAMU_KERNELS_TILE`` names
a depth, the CPU tensors taken for an sm_90 GPU's). ``--channels-first`` gives the ops their
sequences as [B, R, L] (``channels_first=True``), compiling the channels-first kernels
(``SAMU_KERNELS_TIME_TILE`` sets their tile).

The launch geometry is the heuristic's for the tiny problem; set ``SAMU_KERNELS_TILE``
(e.g. ``block_r=128,warps=8,bwd_warps=8,stages=3``) to compile another one. Exit status 0
when everything compiled, 1 otherwise (the failures are printed).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

os.environ.pop("TRITON_INTERPRET", None)  # must precede the first triton import

import torch
import triton
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia import compiler as nvidia_compiler
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.compiler.compiler import CompiledKernel
from triton.runtime.jit import JITFunction
from triton.tools.disasm import get_sass

import samu_kernels
from samu_kernels.common import launch
from samu_kernels.common.geometry import TILE_ENV, TMA_STAGES

TARGET = GPUTarget("cuda", 90, 32)
DEFAULT_BACKENDS = (
    *(backend for _, backend, _ in samu_kernels.REFERENCE_FILE_ROWS),
    "fused_fused_output_fused_write_shared_sfu_grouped_prefix32_hierarchical_chunk16",
    "fused_shared_sfu_chunk16",
    "hierarchical_chunk8",
    "fused_write_chunk64",
    "chunk16",
)
SHAPE = (2, 40, 24)
SHOWN_CONSTEXPRS = (
    "T",
    "TILE",
    "SEGMENTS",
    "UNROLL",
    "BLOCK_R",
    "CHANNELS",
    "GATE_MODE",
    "HAS_RESETS",
    "HAS_H0",
)
"""The constexprs ``--stats`` prints for each kernel."""
CUOBJDUMP = Path(nvidia_compiler.__file__).parent / "bin" / "cuobjdump"


@dataclass(frozen=True)
class KernelStats:
    """Resources and SASS instruction mix of one compiled kernel."""

    name: str
    constants: str
    registers: int
    shared_memory: int  # bytes per block
    instructions: int
    loop_instructions: int  # the first loop's body (:func:`first_loop_instructions`)
    special_function: int
    global_loads: int
    global_stores: int
    local_memory: int  # LDL + STL: register spills (and local arrays) when non-zero


def sass_opcodes(sass: str) -> Counter[str]:
    """Opcode counts (``FFMA``, ``MUFU``, ``LDG``, ...) of disassembled SASS text."""
    opcodes: Counter[str] = Counter()
    for line in sass.splitlines():
        if "\t" not in line:
            continue
        instruction = line.split("\t", 1)[1].strip()
        if instruction.startswith("@"):  # a predicate guard
            instruction = instruction.split(" ", 1)[1]
        opcode = instruction.split(" ", 1)[0].rstrip(";").split(".")[0]
        if opcode and opcode[0].isupper():
            opcodes[opcode] += 1
    return opcodes


SASS_LABEL = re.compile(r"^(\.?L\w+):$")
SASS_BRANCH = re.compile(r"\bBRA (\.?L\w+);")


def first_loop_instructions(sass: str) -> int:
    """Instructions of the first loop in disassembled SASS text: from the label that its
    first backward branch jumps to, through that branch; 0 when nothing branches back.

    In the time-split kernels that is the tile loop (the per-tile work, which sets their
    issue floor); the out-of-line copies of its wait paths, placed after it, branch back
    later. For the row walks it may be an inner loop.
    """
    position: dict[str, int] = {}
    count = 0
    for line in sass.splitlines():
        label = SASS_LABEL.match(line)
        if label:
            position[label.group(1)] = count
            continue
        if "\t" not in line:
            continue
        count += 1
        branch = SASS_BRANCH.search(line)
        if branch and branch.group(1) in position:
            return count - position[branch.group(1)]
    return 0


def kernel_stats(name: str, constants: str, kernel: CompiledKernel) -> KernelStats:
    """Registers per thread (cuobjdump) and SASS counts of ``kernel``."""
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run(
            [str(CUOBJDUMP), "--dump-resource-usage", str(cubin)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    registers = re.search(r"REG:(\d+)", usage)
    sass = get_sass(kernel.asm["cubin"])
    opcodes = sass_opcodes(sass)
    return KernelStats(
        name,
        constants,
        int(registers.group(1)) if registers else -1,
        kernel.metadata.shared,
        sum(opcodes.values()),
        first_loop_instructions(sass),
        opcodes["MUFU"],
        opcodes["LDG"],
        opcodes["STG"],
        opcodes["LDL"] + opcodes["STL"],
    )


class Compiler:
    """Compiles each distinct (kernel, signature, constexprs) once; records failures."""

    def __init__(self, *, stats: bool = False) -> None:
        self.compiled: set[tuple[object, ...]] = set()
        self.failures: list[str] = []
        self.stats: list[KernelStats] | None = [] if stats else None

    def __call__(
        self, fn: JITFunction[Any], args: Sequence[object], kwargs: dict[str, Any]
    ) -> None:
        names = [p.name for p in fn.params]
        bound: dict[str, object] = dict(zip(names, args, strict=False))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        signature: dict[str, str] = {}
        constants: dict[tuple[int], object] = {}
        attrs: dict[tuple[int], list[list[object]]] = {}
        for index, param in enumerate(fn.params):
            value = bound.get(param.name, param.default)
            if param.is_constexpr or value is None:
                signature[param.name] = "constexpr"
                constants[(index,)] = value
                continue
            # Specialized as the JIT does at a launch: an integer equal to 1 becomes a
            # constant; integers divisible by 16 and 16-byte aligned pointers carry
            # tt.divisibility, which lets the compiler vectorize loads and stores.
            kind, key = native_specialize_impl(
                CUDABackend,
                value,
                param.is_const,
                not param.do_not_specialize,
                not param.do_not_specialize_on_alignment,
            )
            signature[param.name] = kind
            if kind == "constexpr":
                constants[(index,)] = key
            elif key:
                attrs[(index,)] = CUDABackend.parse_attr(key)
        options = {k: kwargs[k] for k in ("num_warps", "num_stages") if k in kwargs}
        key = (fn.__name__, tuple(signature.items()), repr(constants), tuple(options.items()))
        if key in self.compiled:
            return
        self.compiled.add(key)
        try:
            compiled = triton.compile(
                ASTSource(fn, signature, constants, attrs), target=TARGET, options=options
            )
        except Exception as error:  # every compiler error is reported
            last = str(error).strip().splitlines()[-1:] or [repr(error)]
            self.failures.append(f"{fn.__name__} {constants}: {last[0][:300]}")
            return
        if compiled.metadata.shared > launch.SHARED_MEMORY_PER_BLOCK:
            self.failures.append(
                f"{fn.__name__} {constants}: needs {compiled.metadata.shared:,} bytes of shared "
                f"memory, sm_90 gives a block {launch.SHARED_MEMORY_PER_BLOCK:,}"
            )
        if self.stats is not None:
            shown = {
                param.name: bound.get(param.name, param.default)
                for param in fn.params
                if param.is_constexpr and param.name in SHOWN_CONSTEXPRS
            }
            dtype = next((kind for kind in signature.values() if kind.startswith("*")), "")
            summary = " ".join([dtype[1:], *(f"{key}={value}" for key, value in shown.items())])
            self.stats.append(kernel_stats(fn.__name__, summary, compiled))
        rows = rows_per_block(bound)
        if rows >= 4:
            waits = store_then_load_count(compiled.asm["ptx"])
            if waits >= rows // 2:
                self.failures.append(
                    f"{fn.__name__} {constants}: {waits} global loads follow a global store in "
                    f"the PTX ({rows} rows per block): rows are no longer loaded before they "
                    "are stored"
                )


def rows_per_block(bound: dict[str, object]) -> int:
    """Rows a thread loads together: the row walk's UNROLL, or a time-split thread's rows per
    tile (TILE / SEGMENTS); 0 for kernels without rows."""
    unroll, tile, segments = (bound.get(key) for key in ("UNROLL", "TILE", "SEGMENTS"))
    if isinstance(tile, int) and isinstance(segments, int):
        return tile // segments
    return unroll if isinstance(unroll, int) else 0


def store_then_load_count(ptx: str) -> int:
    """How often a global load follows a global store in ``ptx`` (text order).

    The scan kernels load a whole block of rows before storing any (a store may alias a later
    load, so the compiler never hoists a load above one): their rolled loops give 0-1
    store-to-load turns in the text. Rows loaded and stored one by one give one turn per row
    (the time-split backward once read its saved states that way, between the rows'
    gradient stores: ~1.3x slower forward + backward on the H200).
    """
    turns = 0
    last = ""
    for line in ptx.splitlines():
        op = line.strip().split(" ", 1)[0]
        if op.startswith("ld.global"):
            turns += last == "st"
            last = "ld"
        elif op.startswith("st.global"):
            last = "st"
    return turns


def intercept_launches(compiler: Compiler) -> None:
    """Route ``kernel[grid](...)`` and ``kernel.run(...)`` to ``compiler``."""

    def getitem(self: JITFunction[Any], grid: object) -> Callable[..., None]:
        return lambda *args, **kwargs: compiler(self, args, kwargs)

    def run(self: JITFunction[Any], *args: object, grid: object = None, **kwargs: Any) -> None:
        compiler(self, args, kwargs)

    JITFunction.__getitem__ = getitem
    JITFunction.run = run


def exercise(
    backend: str,
    failures: list[str],
    shape: tuple[int, int, int] = SHAPE,
    *,
    channels_first: bool = False,
) -> None:
    """Forward + backward of ``backend`` on a ``shape`` [B, L, R] problem in every supported
    variant (with ``channels_first``, its sequences given as [B, R, L])."""
    spec = samu_kernels.parse_backend(backend)
    batch, length, width = shape
    sequence_shape = (batch, width, length) if channels_first else shape
    if spec.fused:
        architectures = ["rglru"]
    elif spec.fused_output:
        architectures = ["samu"]
    else:
        architectures = ["rglru", "samu"]
    variants = itertools.product(architectures, (torch.bfloat16, torch.float32), (False, True))
    for (architecture, dtype, resets), with_h0 in itertools.product(variants, (False, True)):
        segment_pos = torch.arange(length).repeat(batch, 1) if resets else None
        h0 = torch.randn(batch, width, requires_grad=True) if with_h0 else None

        def sequence(dtype: torch.dtype = dtype) -> torch.Tensor:
            return torch.randn(sequence_shape, dtype=dtype, requires_grad=True)

        try:
            if architecture == "rglru":
                out = samu_kernels.rglru_scan(
                    sequence(), sequence(), sequence(), torch.randn(width, requires_grad=True),
                    sequence(), segment_pos=segment_pos, h0=h0, backend=backend,
                    channels_first=channels_first,
                )  # fmt: skip
                torch.autograd.backward(out.output.float().sum())
                continue
            channels = [torch.randn(width, requires_grad=True) for _ in range(3)]
            scalars = [torch.tensor(0.1, requires_grad=True) for _ in range(4)]
            for controller in samu_kernels.CONTROLLERS:
                out = samu_kernels.samu_scan(
                    sequence(), sequence(), channels[0], channels[1], scalars[0], channels[2],
                    scalars[1], scalars[2], scalars[3], segment_pos=segment_pos, h0=h0,
                    backend=backend, controller=controller, channels_first=channels_first,
                )  # fmt: skip
                torch.autograd.backward(out.output.float().sum())
        except Exception as error:  # a launcher error is reported, not fatal
            failures.append(f"{backend} ({architecture}, {dtype}): {error!r}"[:400])


def _shape(text: str) -> tuple[int, int, int]:
    try:
        batch, length, width = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected B,L,R (three integers), got {text!r}") from None
    if min(batch, length, width) < 1:
        raise argparse.ArgumentTypeError(f"expected positive sizes, got {text!r}")
    return batch, length, width


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help="a Triton backend to compile (repeatable; default: a representative set)",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="print each kernel's registers and SASS instruction mix",
    )
    parser.add_argument(
        "--shape",
        type=_shape,
        default=SHAPE,
        metavar="B,L,R",
        help="problem size the ops are run at (default 2,40,24)",
    )
    parser.add_argument(
        "--loads",
        choices=("pointers", "descriptors"),
        default="pointers",
        help="how the time-split kernels load their tiles (default: pointers, as on a GPU "
        "without the Tensor Memory Accelerator; descriptors: as SAMU's default on sm_90)",
    )
    parser.add_argument(
        "--channels-first",
        action="store_true",
        help="give the ops [B, R, L] sequences (channels_first=True): the channels-first kernels",
    )
    args = parser.parse_args(argv)
    if args.loads == "descriptors":
        asked = os.environ.get(TILE_ENV, "")
        if "tma=" not in asked:
            os.environ[TILE_ENV] = ",".join(filter(None, (asked, f"tma={TMA_STAGES}")))
        # The CPU tensors stand for an sm_90 GPU's (the launcher's check is cached per device).
        launch.tma_device = lru_cache(lambda device: True)
    compiler = Compiler(stats=args.stats)
    intercept_launches(compiler)
    for backend in args.backend or DEFAULT_BACKENDS:
        exercise(backend, compiler.failures, args.shape, channels_first=args.channels_first)
    if compiler.stats:
        print(
            f"{'kernel':28} {'regs':>5} {'smem':>6} {'SASS':>6} {'LOOP':>5} {'MUFU':>5} {'LDG':>4} "
            f"{'STG':>4} {'LOCAL':>5}  constexprs"
        )
        for item in compiler.stats:
            print(
                f"{item.name:28} {item.registers:5d} {item.shared_memory:6d} "
                f"{item.instructions:6d} {item.loop_instructions:5d} {item.special_function:5d} "
                f"{item.global_loads:4d} {item.global_stores:4d} {item.local_memory:5d}  "
                f"{item.constants}"
            )
    print(f"compiled {len(compiler.compiled)} kernels for sm_90, {len(compiler.failures)} failures")
    for failure in compiler.failures:
        print("FAIL", failure)
    return 1 if compiler.failures else 0


if __name__ == "__main__":
    sys.exit(main())
