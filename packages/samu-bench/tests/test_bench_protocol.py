"""The protocol on CPU: AB/BA order, warm-up exclusion, step contents, memory accounting."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

import samu_schema
from samu_bench import (
    BenchError,
    CasePlan,
    CaseSpec,
    ProtocolSettings,
    Row,
    StepEvent,
    interleaved_order,
    measure_case,
    result_document,
)
from samu_bench import protocol as protocol_module
from samu_bench.instruments import MemoryReading
from samu_bench.plan import SampleLimit

CPU = torch.device("cpu")


class RecordingModule(nn.Module):
    """A linear map that logs every forward and checks that gradients were cleared."""

    def __init__(self, name: str, width: int, log: list[str]) -> None:
        super().__init__()
        self.name = name
        self.linear = nn.Linear(width, width)
        self.log = log
        self.gradients_seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.grad is None, "the input gradient must be cleared before each step"
        assert all(parameter.grad is None for parameter in self.parameters())
        assert torch.is_autocast_enabled(x.device.type)
        self.log.append(self.name)
        output: torch.Tensor = self.linear(x)
        output.register_hook(  # type: ignore[no-untyped-call]
            lambda gradient: self.gradients_seen.append(gradient.clone())
        )
        return output


class Recorder:
    """Makes rows of `RecordingModule`s that share one forward log."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.modules: dict[str, RecordingModule] = {}

    def row(
        self,
        name: str,
        *,
        compiled: bool = False,
        sample_limit: SampleLimit | None = None,
        step_graph: bool = False,
        cuda_graphs: bool = False,
    ) -> Row:
        """A row (architecture "test", backend `name`) building a `RecordingModule`."""

        def build(case: CaseSpec, row: Row, device: torch.device) -> nn.Module:
            module = RecordingModule(name, case.width, self.log).to(device)
            self.modules[name] = module
            return module

        return Row(
            "test",
            name,
            None,
            compiled=compiled,
            build_module=build,
            sample_limit=sample_limit,
            step_graph=step_graph,
            cuda_graphs=cuda_graphs,
        )


@pytest.fixture
def recorder() -> Recorder:
    """A fresh `Recorder`."""
    return Recorder()


@pytest.mark.parametrize(
    ("rows", "samples", "expected"),
    [
        (2, 4, [0, 1, 1, 0, 0, 1, 1, 0]),
        (3, 3, [0, 1, 2, 2, 1, 0, 0, 1, 2]),
        (1, 3, [0, 0, 0]),
        (4, 1, [0, 1, 2, 3]),
    ],
)
def test_interleaved_order_is_ab_ba(rows: int, samples: int, expected: list[int]) -> None:
    order = interleaved_order(rows, samples)
    assert order == expected
    assert all(order.count(row) == samples for row in range(rows))


class CountingTimer:
    """Runs the step and returns 1, 2, 3, ... ms in call order."""

    name = "counting"

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def time_ms(self, step: Callable[[], None]) -> float:
        step()
        return float(next(self._next))


class ScriptedMeter:
    """Logs baseline reads and peak resets; peaks (and baselines, if given) come from scripts."""

    def __init__(
        self,
        log: list[str],
        peaks: Iterator[MemoryReading],
        baselines: Iterator[MemoryReading] | None = None,
    ) -> None:
        self._log = log
        self._peaks = peaks
        self._baselines = baselines

    def current(self) -> MemoryReading:
        self._log.append("baseline")
        return MemoryReading(1000, 2000) if self._baselines is None else next(self._baselines)

    def reset_peak(self) -> None:
        self._log.append("reset")

    def peak(self) -> MemoryReading:
        return next(self._peaks)


def test_warmup_is_untimed_and_samples_interleave(
    tiny_case: CaseSpec, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protocol_module, "timer_for", lambda device: CountingTimer())
    events: list[StepEvent] = []
    plan = CasePlan(tiny_case, (recorder.row("a"), recorder.row("b")))
    entry = measure_case(plan, ProtocolSettings(samples=3, warmup=2), CPU, events.append)

    assert recorder.log == ["a", "b", "a", "b", "a", "b", "b", "a", "a", "b"]
    samples = {row["backend"]: row["optimizer_step"]["samples_ms"] for row in entry["rows"]}
    assert samples == {"a": [1.0, 4.0, 5.0], "b": [2.0, 3.0, 6.0]}
    phases = [(event.row, event.phase, event.index) for event in events]
    assert phases[:4] == [
        ("test:a", "warmup", 0),
        ("test:b", "warmup", 0),
        ("test:a", "warmup", 1),
        ("test:b", "warmup", 1),
    ]
    assert phases[4:] == [
        ("test:a", "sample", 0),
        ("test:b", "sample", 0),
        ("test:b", "sample", 1),
        ("test:a", "sample", 1),
        ("test:a", "sample", 2),
        ("test:b", "sample", 2),
    ]


def test_warmup_runs_in_rounds_and_a_limited_row_leaves_early(
    tiny_case: CaseSpec, recorder: Recorder
) -> None:
    # Every row's last warm-up step follows every other row's first steps: a one-time event
    # that one row's first steps cause in another (a recompilation) stays untimed.
    limited = recorder.row("b", sample_limit=SampleLimit(1, 2, "slow"))
    plan = CasePlan(tiny_case, (recorder.row("a"), limited, recorder.row("c")))
    measure_case(plan, ProtocolSettings(samples=2, warmup=3), CPU)

    warmup, samples = recorder.log[:8], recorder.log[8:]
    assert warmup == ["a", "b", "c", "a", "b", "c", "a", "c"]
    assert samples == ["a", "b", "c", "c", "a"]


def test_statistics_come_from_summarize(tiny_case: CaseSpec, recorder: Recorder) -> None:
    plan = CasePlan(tiny_case, (recorder.row("a"),))
    entry = measure_case(plan, ProtocolSettings(samples=5, warmup=2), CPU)
    step = entry["rows"][0]["optimizer_step"]
    assert len(step["samples_ms"]) == 5
    assert all(sample > 0 for sample in step["samples_ms"])
    assert step == samu_schema.summarize(step["samples_ms"]).model_dump(mode="json")


def test_step_uses_fixed_output_gradient_and_updates_parameters(
    tiny_case: CaseSpec, recorder: Recorder
) -> None:
    plan = CasePlan(tiny_case, (recorder.row("a"),))
    torch.manual_seed(0)
    measure_case(plan, ProtocolSettings(samples=2, warmup=2), CPU)
    module = recorder.modules["a"]
    assert len(module.gradients_seen) == 4
    first = module.gradients_seen[0]
    assert first.shape == (tiny_case.batch, tiny_case.length, tiny_case.width)
    assert torch.count_nonzero(first) == first.numel()
    for gradient in module.gradients_seen[1:]:
        assert torch.equal(gradient, first)
    assert module.linear.weight.grad is not None  # the last step's gradients stay


def test_cpu_case_has_null_memory_and_counts_parameters(
    tiny_case: CaseSpec, recorder: Recorder
) -> None:
    entry = measure_case(
        CasePlan(tiny_case, (recorder.row("a"),)), ProtocolSettings(samples=2), CPU
    )
    row = entry["rows"][0]
    memory_fields = [key for key in row if key.endswith("_bytes")]
    assert len(memory_fields) == 6
    assert all(row[key] is None for key in memory_fields)
    assert row["parameters"] == tiny_case.width * tiny_case.width + tiny_case.width
    assert row["compiled"] is False
    assert entry["config"] == {"width": 24, "rnn_width": 32, "depth": 2}


def test_memory_accounting_order_and_peaks(
    tiny_case: CaseSpec, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    peaks = iter(
        [
            MemoryReading(1500, 2100),  # a, sample 0
            MemoryReading(1700, 2000),  # b, sample 0
            MemoryReading(1600, 2600),  # b, sample 1
            MemoryReading(1400, 2300),  # a, sample 1
        ]
    )
    meter = ScriptedMeter(recorder.log, peaks)
    monkeypatch.setattr(protocol_module, "memory_meter_for", lambda device: meter)
    plan = CasePlan(tiny_case, (recorder.row("a"), recorder.row("b")))
    entry = measure_case(plan, ProtocolSettings(samples=2, warmup=2), CPU)

    assert recorder.log[4:] == [
        "baseline", "reset", "a",
        "baseline", "reset", "b",
        "reset", "b",
        "reset", "a",
    ]  # fmt: skip
    row_a, row_b = entry["rows"]
    assert (row_a["peak_allocated_bytes"], row_a["peak_reserved_bytes"]) == (1500, 2300)
    assert (row_b["peak_allocated_bytes"], row_b["peak_reserved_bytes"]) == (1700, 2600)
    for row in entry["rows"]:
        assert (row["baseline_allocated_bytes"], row["baseline_reserved_bytes"]) == (1000, 2000)
        for kind in ("allocated", "reserved"):
            delta = row[f"peak_{kind}_bytes"] - row[f"baseline_{kind}_bytes"]
            assert row[f"peak_{kind}_delta_bytes"] == delta


def test_step_graph_rows_read_memory_from_the_capture(
    tiny_case: CaseSpec, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The capture itself needs CUDA; here it only logs, so the protocol's order and memory
    # bookkeeping around it show.
    for method in ("prepare_capture", "capture_step"):
        monkeypatch.setattr(
            protocol_module.ResidentRow,
            method,
            lambda self, name=method: recorder.log.append(name),
        )
    peaks = iter(
        [
            MemoryReading(1900, 2500),  # the capture
            MemoryReading(1010, 2000),  # sample 0
            MemoryReading(1020, 2000),  # sample 1
        ]
    )
    meter = ScriptedMeter(recorder.log, peaks)
    monkeypatch.setattr(protocol_module, "memory_meter_for", lambda device: meter)
    plan = CasePlan(tiny_case, (recorder.row("a", step_graph=True),))
    entry = measure_case(plan, ProtocolSettings(samples=2, warmup=3), CPU)

    assert recorder.log == [
        "a", "a",  # warm-up steps
        "prepare_capture", "baseline", "reset", "capture_step", "a",  # the capture, a replay
        "baseline", "reset", "a",
        "reset", "a",
    ]  # fmt: skip
    [row] = entry["rows"]
    assert (row["backend"], row["step_graph"], row["cuda_graphs"]) == ("a+stepgraph", True, False)
    assert (row["peak_allocated_bytes"], row["peak_reserved_bytes"]) == (1900, 2500)
    assert (row["peak_allocated_delta_bytes"], row["peak_reserved_delta_bytes"]) == (900, 500)
    assert row["memory_measured_in"] == protocol_module.STEP_GRAPH_MEMORY_NOTE
    assert row["replay_peak_allocated_delta_bytes"] == 20


def test_cuda_graph_rows_read_memory_above_the_steady_state(
    tiny_case: CaseSpec, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The recording step starts while the previous warm-up generation's tensors are still
    # held (baseline 1500); its peak counts above the steady state of the timed samples (1000).
    monkeypatch.setattr(torch, "compile", lambda entry, mode: entry)
    baselines = iter(
        [
            MemoryReading(1000, 2000),  # warm-up 0: compilation and Inductor's warm-up run
            MemoryReading(1500, 2600),  # warm-up 1: the recording
            MemoryReading(1000, 2600),  # warm-up 2: a replay
            MemoryReading(1000, 2600),  # before the first timed sample
        ]
    )
    peaks = iter(
        [
            MemoryReading(1400, 2600),  # compilation and warm-up run
            MemoryReading(1600, 2600),  # the recording
            MemoryReading(1000, 2600),  # the replay
            MemoryReading(1010, 2600),  # sample 0
            MemoryReading(1000, 2600),  # sample 1
        ]
    )
    meter = ScriptedMeter(recorder.log, peaks, baselines)
    monkeypatch.setattr(protocol_module, "memory_meter_for", lambda device: meter)
    plan = CasePlan(tiny_case, (recorder.row("a", compiled=True, cuda_graphs=True),))
    entry = measure_case(plan, ProtocolSettings(samples=2, warmup=3), CPU)

    [row] = entry["rows"]
    assert row["backend"] == "a+compile+cudagraphs"
    assert (row["baseline_allocated_bytes"], row["peak_allocated_bytes"]) == (1000, 1600)
    assert row["peak_allocated_delta_bytes"] == 600
    assert row["memory_measured_in"] == protocol_module.CUDA_GRAPH_MEMORY_NOTE
    assert row["replay_peak_allocated_delta_bytes"] == 10


def test_only_a_prepared_step_graph_row_is_captured(
    tiny_case: CaseSpec, recorder: Recorder
) -> None:
    member = protocol_module.ResidentRow(tiny_case, recorder.row("a"), CPU, seed=0)
    with pytest.raises(BenchError, match="only a step-graph row is captured"):
        member.prepare_capture()
    graph_row = protocol_module.ResidentRow(
        tiny_case, recorder.row("b", step_graph=True), CPU, seed=0
    )
    with pytest.raises(BenchError, match=r"prepare_capture\(\) must run"):
        graph_row.capture_step()


def test_compiled_rows_are_wrapped_before_warmup(
    tiny_case: CaseSpec, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled: list[Callable[[torch.Tensor], torch.Tensor]] = []

    def fake_compile(
        entry: Callable[[torch.Tensor], torch.Tensor], mode: str | None
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        assert recorder.log == []  # before any step
        assert mode is None  # default mode: no CUDA graphs
        compiled.append(entry)
        return entry

    monkeypatch.setattr(torch, "compile", fake_compile)
    plan = CasePlan(tiny_case, (recorder.row("a", compiled=True), recorder.row("b")))
    entry = measure_case(plan, ProtocolSettings(samples=1, warmup=2), CPU)
    [compiled_entry] = compiled
    assert compiled_entry.__code__.co_name == "test:a+compile"  # the row's own code object
    assert recorder.log[:2] == ["a", "b"]  # the entry calls the row's module
    assert [(row["backend"], row["compiled"]) for row in entry["rows"]] == [
        ("a+compile", True),
        ("b", False),
    ]


class Mixer(nn.Module):
    """A linear map whose forward breaks the graph when asked (like a peer's scan)."""

    def __init__(self, width: int, *, breaks: bool) -> None:
        super().__init__()
        self.breaks = breaks
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.breaks:
            torch._dynamo.graph_break()
        output: torch.Tensor = self.linear(x)
        return output


class MixerBlock(nn.Module):
    """tanh, then a `Mixer`: every row of a case is this class, like the residual block."""

    def __init__(self, width: int, *, breaks: bool) -> None:
        super().__init__()
        self.mixer = Mixer(width, breaks=breaks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output: torch.Tensor = self.mixer(torch.tanh(x))
        return output


@pytest.fixture
def eager_compile(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`torch.compile` with the eager backend (fast on CPU) and a fresh dynamo cache."""
    real_compile = torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda entry, mode: real_compile(entry, backend="eager", mode=mode)
    )
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def cached_graphs(function: Callable[..., object]) -> int:
    """How many graphs dynamo holds for `function`'s code object."""
    entries = torch._C._dynamo.eval_frame._debug_get_cache_entry_list(function.__code__)
    return len(entries)


@pytest.mark.usefixtures("eager_compile")
def test_compiled_rows_keep_their_own_graphs(tiny_case: CaseSpec) -> None:
    # A row whose graph breaks inside the mixer call leaves a MixerBlock graph guarded on the
    # mixer's type only. Sharing MixerBlock.forward's cache, the whole row would run that
    # graph and compile its mixer as a frame of its own; entered apart, it never does.
    def row(name: str, *, breaks: bool) -> Row:
        def build(case: CaseSpec, row: Row, device: torch.device) -> nn.Module:
            return MixerBlock(case.width, breaks=breaks).to(device)

        return Row("test", name, None, compiled=True, build_module=build)

    plan = CasePlan(tiny_case, (row("whole", breaks=False), row("broken", breaks=True)))
    measure_case(plan, ProtocolSettings(samples=2, warmup=2), CPU)
    assert cached_graphs(MixerBlock.forward) == 1  # the broken row's graph alone
    assert cached_graphs(Mixer.forward) == 1  # only the broken row ran its mixer as a frame


@pytest.mark.usefixtures("eager_compile")
def test_each_case_compiles_afresh(tiny_case: CaseSpec) -> None:
    # Graphs of an earlier case count against dynamo's recompile limit per function: a
    # graph-broken block of the third reference case once ran eager because of them.
    def broken(case: CaseSpec, row: Row, device: torch.device) -> nn.Module:
        return MixerBlock(case.width, breaks=True).to(device)

    row = Row("test", "broken", None, compiled=True, build_module=broken)
    for width in (24, 16):
        case = dataclasses.replace(tiny_case, width=width)
        measure_case(CasePlan(case, (row,)), ProtocolSettings(samples=1, warmup=2), CPU)
    assert cached_graphs(MixerBlock.forward) == 1  # the second case's graph alone


class DriftingModule(nn.Module):
    """A linear map whose third and later calls trace differently (a guarded counter)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        output: torch.Tensor = self.linear(x)
        return output * 2 if self.calls > 2 else output


@pytest.mark.usefixtures("eager_compile")
def test_a_compilation_in_a_timed_sample_is_refused(tiny_case: CaseSpec) -> None:
    def build(case: CaseSpec, row: Row, device: torch.device) -> nn.Module:
        return DriftingModule(case.width).to(device)

    plan = CasePlan(tiny_case, (Row("test", "drift", None, compiled=True, build_module=build),))
    with pytest.raises(BenchError) as caught:
        measure_case(plan, ProtocolSettings(samples=1, warmup=2), CPU)
    message = str(caught.value)
    assert message.startswith("case 'tiny', row test:drift+compile: torch.compile compiled")
    assert "during a timed sample" in message
    assert "raise --warmup" in message
    assert "\n" not in message


def test_block_rows_give_a_valid_cpu_file(tiny_case: CaseSpec) -> None:
    rows = (Row("rglru", "reference", None), Row("samu", "reference", "reference"))
    settings = ProtocolSettings(samples=2, warmup=2)
    entry = measure_case(CasePlan(tiny_case, rows), settings, CPU)
    environment = {"torch": torch.__version__, "cuda": None, "gpu": None, "device": "cpu"}
    report = samu_schema.validate(result_document(environment, settings, "perf_counter", [entry]))
    assert report.ok, report.problems
    parameters = [row["parameters"] for row in entry["rows"]]
    assert parameters[0] != parameters[1]


def test_a_failing_row_is_named_in_one_line(tiny_case: CaseSpec) -> None:
    def broken(case: CaseSpec, row: Row, device: torch.device) -> torch.nn.Module:
        raise RuntimeError("out of memory\nwith details on a second line")

    plan = CasePlan(tiny_case, (Row("test", "broken", None, build_module=broken),))
    with pytest.raises(
        BenchError, match=r"^case 'tiny', row test:broken: RuntimeError: out"
    ) as info:
        measure_case(plan, ProtocolSettings(), CPU)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"warmup": 1}, "warmup must be at least 2"),
        ({"samples": 0}, "samples must be at least 1"),
    ],
)
def test_settings_refuse_too_few_steps(settings: dict[str, int], message: str) -> None:
    with pytest.raises(BenchError, match=message):
        ProtocolSettings(**settings)


def test_repeated_rows_are_refused(tiny_case: CaseSpec) -> None:
    row = Row("rglru", "reference", None)
    with pytest.raises(BenchError, match="given twice"):
        CasePlan(tiny_case, (row, row))


def test_a_backend_may_run_eager_and_compiled_in_one_case(tiny_case: CaseSpec) -> None:
    eager = Row("rglru", "reference", None)
    compiled = Row("rglru", "reference", None, compiled=True)
    plan = CasePlan(tiny_case, (eager, compiled))
    assert [row.label for row in plan.rows] == ["rglru:reference", "rglru:reference+compile"]
