"""The timing protocol: one case, its rows resident, warm-up, AB/BA samples, memory.

See `docs/benchmarking.md` and the contract `protocol.md`. One sample is one complete
training step: gradients cleared (set to None, the input's too), forward under bf16
autocast, backward with a fixed random output gradient, fused AdamW step.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from samu_bench.errors import BenchError, first_line
from samu_bench.instruments import CudaMemoryMeter, MemoryReading, memory_meter_for, timer_for
from samu_bench.plan import CasePlan, CaseSpec, ProtocolSettings, Row
from samu_bench.results import case_entry, row_entry


@dataclass(frozen=True)
class StepEvent:
    """Reported after every step of a case: which row, warm-up or timed sample, which one."""

    case: str
    row: str
    phase: Literal["warmup", "sample"]
    index: int


StepObserver = Callable[[StepEvent], None]
"""Called after every warm-up step and every timed sample (e.g. to advance a progress bar)."""


def interleaved_order(row_count: int, samples: int) -> list[int]:
    """Row indices in the order they are sampled: AB/BA.

    Round k measures rows `0..row_count-1` for even k and in reverse for odd k, so every
    row gets `samples` samples and drift falls equally on all rows.
    """
    order: list[int] = []
    for round_index in range(samples):
        rows = range(row_count)
        order.extend(rows if round_index % 2 == 0 else reversed(rows))
    return order


def _random_tensor(shape: Sequence[int], seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Standard-normal values from a seeded CPU generator (the same on every device)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=generator, dtype=torch.float32).to(dtype)


def compile_apart(
    module: nn.Module, name: str, *, cuda_graphs: bool = False
) -> Callable[[torch.Tensor], torch.Tensor]:
    """`torch.compile` of `module`'s call, entered through a code object of its own.

    Dynamo caches graphs per code object and reuses, most recent first, any graph whose
    guards a call passes. Rows of one case are modules of the same class, so
    `torch.compile(module)` would share one cache for their `forward`. A row whose graph
    breaks inside a submodule call (a peer's scan) leaves a graph that stops before the
    call and guards little more than the submodule's type: the next row's module passes
    those guards and runs that graph, with the break, instead of its own whole graph (seen
    on the H200: our compiled rows timed 7.7 ms among the peers, 6.1-6.3 ms alone). Entered
    through its own code object (named `name`), a row's `forward` is traced inline and its
    graphs stay the row's own.

    Args:
        module: the row's module, mapping `x: [B, L, D]` to its output.
        name: the row's label, the code object's name (shown in dynamo's logs).
        cuda_graphs: compile with `mode="reduce-overhead"`: Inductor records the forward
            and backward graphs as CUDA graphs (CUDAGraph Trees) and replays them.
    """

    def call(inputs: torch.Tensor) -> torch.Tensor:
        output: torch.Tensor = module(inputs)
        return output

    own_code = call.__code__.replace(co_name=name, co_qualname=name)
    entry = types.FunctionType(own_code, call.__globals__, name, None, call.__closure__)
    mode = "reduce-overhead" if cuda_graphs else None
    compiled: Callable[[torch.Tensor], torch.Tensor] = torch.compile(entry, mode=mode)
    return compiled


class ResidentRow:
    """A row's module, fused AdamW optimizer, input and output gradient, kept for a case.

    The input `x: [B, L, D]` is fp32 and requires grad; the module's parameters are fp32.
    The fixed output gradient is drawn (seeded) at the first step, in the output's shape
    and dtype. A row replayed from CUDA graphs marks the start of every step for CUDAGraph
    Trees (the previous step's graph outputs are dead by then) and keeps its input at a
    static address, so a replay reads it in place instead of copying it. A step-graph row's
    optimizer is capturable, its autocast keeps no cast cache (capture needs both), and
    after :meth:`capture_step` every step is a replay of the captured one.
    """

    def __init__(self, case: CaseSpec, row: Row, device: torch.device, seed: int) -> None:
        torch.manual_seed(seed)
        module = row.build_module(case, row, device)
        trainable = [parameter for parameter in module.parameters() if parameter.requires_grad]
        if not trainable:
            raise BenchError(f"case {case.name!r}, row {row.label}: the module has no parameters")
        self.row = row
        self.parameters = sum(parameter.numel() for parameter in trainable)
        self._module = module
        self._forward: Callable[[torch.Tensor], torch.Tensor] = (
            compile_apart(module, row.label, cuda_graphs=row.cuda_graphs)
            if row.compiled
            else module
        )
        self._optimizer = torch.optim.AdamW(trainable, fused=True, capturable=row.step_graph)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._capture_stream: torch.cuda.Stream | None = None
        self._device = device
        self._seed = seed
        self._inputs = _random_tensor(case.input_shape, seed, torch.float32).to(device)
        self._inputs.requires_grad_(True)
        if row.cuda_graphs:
            torch._dynamo.mark_static_address(self._inputs)
        self._output_gradient: torch.Tensor | None = None

    @property
    def module(self) -> nn.Module:
        """The row's module (its parameters are the ones the optimizer updates)."""
        return self._module

    def clear_gradients(self) -> None:
        """Set every parameter gradient and the input's gradient to None."""
        self._module.zero_grad(set_to_none=True)
        self._inputs.grad = None

    def forward_backward_update(self) -> None:
        """Forward under bf16 autocast, backward with the fixed gradient, optimizer step."""
        with torch.autocast(
            self._device.type, dtype=torch.bfloat16, cache_enabled=not self.row.step_graph
        ):
            output = self._forward(self._inputs)
        if self._output_gradient is None:
            self._output_gradient = _random_tensor(output.shape, self._seed + 1, output.dtype).to(
                self._device
            )
        torch.autograd.backward(output, self._output_gradient)
        self._optimizer.step()

    def step(self) -> None:
        """One complete training step: clear gradients, then forward, backward and update
        (after :meth:`capture_step`, one replay of the captured step)."""
        if self._graph is not None:
            self._graph.replay()
            return
        self.clear_gradients()
        if self.row.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]
        self.forward_backward_update()

    def prepare_capture(self) -> None:
        """Run one step on the stream the capture will use (step-graph rows, after warm-up).

        Work that initialises lazily per stream (a cuBLAS workspace, for one) must have done
        so on the capture stream before the capture, or it would allocate inside the graph.

        Raises:
            BenchError: the row is not a step-graph row, or it was captured already.
        """
        if not self.row.step_graph:
            raise BenchError(f"row {self.row.label}: only a step-graph row is captured")
        if self._graph is not None:
            raise BenchError(f"row {self.row.label}: the step was captured already")
        current = torch.cuda.current_stream(self._device)
        stream = torch.cuda.Stream(self._device)  # type: ignore[no-untyped-call]
        stream.wait_stream(current)
        with torch.cuda.stream(stream):
            self.step()
        current.wait_stream(stream)
        self._capture_stream = stream

    def capture_step(self) -> None:
        """Capture one whole step as a CUDA graph, after :meth:`prepare_capture`.

        The gradients are set to None first, so that the backward allocates them anew from
        the graph's private memory pool; the capture itself runs nothing. Later calls of
        :meth:`step` replay the graph: gradients and temporaries at the same addresses every
        replay, written afresh (not accumulated).

        Raises:
            BenchError: :meth:`prepare_capture` did not run first, or the step was captured.
        """
        if self._capture_stream is None:
            raise BenchError(
                f"row {self.row.label}: prepare_capture() must run on the row before the capture"
            )
        if self._graph is not None:
            raise BenchError(f"row {self.row.label}: the step was captured already")
        self.clear_gradients()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self._capture_stream):
            self.step()
        self._graph = graph


@contextmanager
def attributed_to(case: CaseSpec, row: Row) -> Iterator[None]:
    """Turn any failure inside the block into a one-line BenchError naming case and row."""
    try:
        yield
    except BenchError:
        raise
    except Exception as error:
        message = first_line(str(error)) or "no message"
        raise BenchError(
            f"case {case.name!r}, row {row.label}: {type(error).__name__}: {message}"
        ) from error


COMPILED_WHILE_TIMING = "Detected recompile when torch.compile stance is 'fail_on_recompile'"
"""How dynamo's error begins when a frame would be compiled under `fail_on_recompile`."""


@contextmanager
def _no_compilation(case: CaseSpec, row: Row) -> Iterator[None]:
    """Refuse any torch.compile compilation inside the block: timed samples exclude it.

    Raises:
        BenchError: dynamo had to compile (the message names case, row and function).
    """
    try:
        with torch.compiler.set_stance("fail_on_recompile"):
            yield
    except RuntimeError as error:
        if COMPILED_WHILE_TIMING not in str(error):
            raise
        where = first_line(str(error)).removeprefix(COMPILED_WHILE_TIMING).strip(". ")
        raise BenchError(
            f"case {case.name!r}, row {row.label}: torch.compile compiled during a timed "
            f"sample ({where}); the warm-up must compile everything: raise --warmup"
        ) from error


CUDA_GRAPH_MEMORY_NOTE = (
    "the warm-up steps, which compile, run Inductor's warm-up in the graphs' pool and record "
    "the CUDA graphs (the largest peak allocated delta, above the lower of the allocations "
    "before that step and before the first timed sample): a lower bound of the step's "
    "memory, since CUDAGraph Trees keep every graphed row's tensors in one shared pool and "
    "a recording frees the previous generation's; a replay makes no allocator calls, so the "
    "timed samples cannot see the step's memory"
)
"""The `memory_measured_in` extra of a row replayed from torch.compile's CUDA graphs."""

STEP_GRAPH_MEMORY_NOTE = (
    "the capture of the whole step's CUDA graph (above the lower of the allocations before "
    "it and before the first timed sample): a replay makes no allocator calls, so the "
    "timed samples cannot see the step's memory"
)
"""The `memory_measured_in` extra of a step-graph row."""


@dataclass(frozen=True)
class StepMemory:
    """Allocator readings around one step: before it, and its peak."""

    baseline: MemoryReading
    peak: MemoryReading

    @property
    def allocated_delta(self) -> int:
        """Peak minus baseline allocated bytes."""
        return self.peak.allocated - self.baseline.allocated


def _graph_step_memory(
    readings: Sequence[StepMemory], steady: MemoryReading | None
) -> StepMemory | None:
    """The reading of the step that made a row's graphs, against the row's steady state.

    Each step's peak is read above the lower of its own baseline and `steady` (the
    allocation before the row's first timed sample): before a recording, CUDAGraph Trees may
    still hold the previous warm-up generation's tensors, which the recording then reuses
    (on the H200, at a small shape whose compiled step allocates 7.4 MB, the recording
    alone read 0 over its own baseline and 4.0 MB over the steady state). Of the steps, the
    one with the largest such delta; None when there are no readings.

    A lower bound of the step's memory: CUDAGraph Trees keep the tensors of every graphed
    row of the process in one pool, and a recording step frees the previous generation's
    (another row's, or this row's warm-up) while it allocates its own, so the steady state
    can already hold memory the step reuses. On the H200 (2026-12-04, another run than the
    7.4 MB above), with two graphed rows resident, the first read 4.0 MB where its compiled
    twin read 7.7 MB; the second read
    40.3 MB, the capture's one-time cuBLAS workspace included.
    """
    against_steady = [
        StepMemory(reading.baseline.min(steady), reading.peak) for reading in readings
    ]
    return max(against_steady, key=lambda reading: reading.allocated_delta, default=None)


def _cuda_graph_skips() -> int:
    """How often Inductor has fallen back from CUDA graphs in this process."""
    return int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])


def _read_around(meter: CudaMemoryMeter | None, action: Callable[[], None]) -> StepMemory | None:
    """Run `action`; with a meter, return the allocator before it and its peak."""
    if meter is None:
        action()
        return None
    baseline = meter.current()
    meter.reset_peak()
    action()
    return StepMemory(baseline, meter.peak())


def _warmup_step(
    case: CaseSpec, member: ResidentRow, meter: CudaMemoryMeter | None
) -> StepMemory | None:
    """One warm-up step, with the allocator read around it when `meter` is given.

    A CUDA-graph row is refused when Inductor declined to capture one of its graphs.

    Raises:
        BenchError: Inductor skipped CUDA graphs for the row (the step ran without them).
    """
    skips = _cuda_graph_skips()
    reading = _read_around(meter, member.step)
    _refuse_skipped_graphs(case, member, skips)
    return reading


def _refuse_skipped_graphs(case: CaseSpec, member: ResidentRow, skips_before: int) -> None:
    """Raise when Inductor skipped CUDA graphs for a `cuda_graphs` row since `skips_before`.

    Raises:
        BenchError: the row's step ran a graph without CUDA graphs (the message names it).
    """
    if member.row.cuda_graphs and _cuda_graph_skips() > skips_before:
        raise BenchError(
            f"case {case.name!r}, row {member.row.label}: torch.compile ran a graph without "
            "CUDA graphs (Inductor skipped them; TORCH_LOGS=perf_hints says why), so the row "
            "would not time what it names"
        )


def _free_cached_memory(device: torch.device) -> None:
    """On CUDA, drop the previous case's tensors and cached blocks: a case starts afresh."""
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def measure_case(
    plan: CasePlan,
    settings: ProtocolSettings,
    device: torch.device,
    observer: StepObserver | None = None,
) -> dict[str, Any]:
    """Time every row of a case by the protocol and return the case's result entry.

    All rows are built first and stay resident; each gets `settings.warmup` untimed steps,
    taken in rounds (every row once per round, in row order) so that a row's last warm-up
    step comes after every other row's first steps; then `settings.samples` timed steps per
    row in AB/BA order. A row with a sample limit takes fewer warm-up steps and samples
    (`settings.for_row(row)`) and drops out of the later rounds. On CUDA a
    sample is timed with events around the step and a synchronize; memory baselines are
    read just before a row's first timed sample and peaks are reset before every sample.
    Elsewhere the clock is `time.perf_counter` and the memory fields are null.

    Rows that replay CUDA graphs make no allocator calls in their samples, so their memory
    fields come from where the graphs were made: the `cuda_graphs` row's warm-up step with
    the largest peak allocated delta (compilation, Inductor's warm-up run and the recording:
    conservative, since the first may count compile-time buffers), a `step_graph` row's
    capture, which takes the place of its last warm-up step (then one untimed replay); both
    above the lower of the allocations before that step and before the first timed sample.

    Returns:
        A JSON-ready dict `{case, batch, length, config, rows[, skipped_rows]}` of the
        result-file format.

    Raises:
        BenchError: a row failed to build, warm up or run (the message names it).
    """
    # The rows of a case are compiled afresh: the graphs of earlier cases would only count
    # against dynamo's recompile limit per function (8), past which a peer's graph-broken
    # block silently ran eager in the third reference case on the H200. The reset also
    # drops CUDAGraph Trees' memory pool, so it comes before the cached blocks are freed.
    torch.compiler.reset()
    _free_cached_memory(device)
    case = plan.case
    timer = timer_for(device)
    meter = memory_meter_for(device)

    def report(row: Row, phase: Literal["warmup", "sample"], index: int) -> None:
        if observer is not None:
            observer(StepEvent(case.name, row.label, phase, index))

    resident: list[ResidentRow] = []
    for row in plan.rows:
        with attributed_to(case, row):
            resident.append(ResidentRow(case, row, device, settings.seed))
    row_settings = [settings.for_row(member.row) for member in resident]
    graph_steps: list[list[StepMemory]] = [[] for _ in resident]
    for round_index in range(max(own.warmup for own in row_settings)):
        for row_index, (member, own) in enumerate(zip(resident, row_settings, strict=True)):
            if round_index >= own.warmup:
                continue
            with attributed_to(case, member.row):
                if member.row.step_graph and round_index == own.warmup - 1:
                    member.prepare_capture()
                    reading = _read_around(meter, member.capture_step)
                    member.step()  # the first replay, untimed
                else:
                    reading = _warmup_step(case, member, meter if member.row.cuda_graphs else None)
            if reading is not None:
                graph_steps[row_index].append(reading)
            report(member.row, "warmup", round_index)

    samples_ms: list[list[float]] = [[] for _ in resident]
    baselines: list[MemoryReading | None] = [None] * len(resident)
    peaks: list[MemoryReading | None] = [None] * len(resident)
    for row_index in interleaved_order(len(resident), settings.samples):
        if len(samples_ms[row_index]) == row_settings[row_index].samples:
            continue  # a row with a sample limit has taken all of its samples
        member = resident[row_index]
        with attributed_to(case, member.row), _no_compilation(case, member.row):
            if meter is not None:
                if baselines[row_index] is None:
                    baselines[row_index] = meter.current()
                meter.reset_peak()
            skips = _cuda_graph_skips()
            samples_ms[row_index].append(timer.time_ms(member.step))
            _refuse_skipped_graphs(case, member, skips)
            if meter is not None:
                peaks[row_index] = meter.peak().max(peaks[row_index])
        report(member.row, "sample", len(samples_ms[row_index]) - 1)

    rows = []
    for member, samples, baseline, peak, readings in zip(
        resident, samples_ms, baselines, peaks, graph_steps, strict=True
    ):
        recording = _graph_step_memory(readings, baseline)
        if recording is None:
            rows.append(row_entry(member.row, samples, member.parameters, baseline, peak, settings))
            continue
        entry = row_entry(
            member.row, samples, member.parameters, recording.baseline, recording.peak, settings
        )
        entry["memory_measured_in"] = (
            STEP_GRAPH_MEMORY_NOTE if member.row.step_graph else CUDA_GRAPH_MEMORY_NOTE
        )
        if baseline is not None and peak is not None:
            entry["replay_peak_allocated_delta_bytes"] = peak.allocated - baseline.allocated
        rows.append(entry)
    return case_entry(case, rows, plan.skipped)
