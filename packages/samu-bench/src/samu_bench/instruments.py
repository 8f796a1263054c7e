"""Step timers and the CUDA memory meter: what the protocol reads around each sample."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch


class StepTimer(Protocol):
    """Times one call of a step, in milliseconds."""

    name: str

    def time_ms(self, step: Callable[[], None]) -> float:
        """Run `step` once and return how long it took (ms)."""
        ...


class CudaEventTimer:
    """CUDA events recorded around the whole step, then a device synchronize."""

    name = "cuda_events"

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        self._end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    def time_ms(self, step: Callable[[], None]) -> float:
        """Run `step` between two recorded events and return the elapsed GPU time (ms)."""
        self._start.record()
        step()
        self._end.record()
        torch.cuda.synchronize(self._device)
        return float(self._start.elapsed_time(self._end))


class MonotonicTimer:
    """`time.perf_counter` around the step: the CPU smoke run's clock."""

    name = "perf_counter"

    def time_ms(self, step: Callable[[], None]) -> float:
        """Run `step` and return the elapsed wall time (ms)."""
        begin = time.perf_counter()
        step()
        return (time.perf_counter() - begin) * 1e3


@dataclass(frozen=True)
class MemoryReading:
    """Allocated and reserved bytes of the CUDA caching allocator."""

    allocated: int
    reserved: int

    def max(self, other: MemoryReading | None) -> MemoryReading:
        """The field-wise maximum of two readings (`other` None: this one)."""
        if other is None:
            return self
        return MemoryReading(
            max(self.allocated, other.allocated), max(self.reserved, other.reserved)
        )

    def min(self, other: MemoryReading | None) -> MemoryReading:
        """The field-wise minimum of two readings (`other` None: this one)."""
        if other is None:
            return self
        return MemoryReading(
            min(self.allocated, other.allocated), min(self.reserved, other.reserved)
        )


class CudaMemoryMeter:
    """Reads `torch.cuda` memory statistics of one device."""

    def __init__(self, device: torch.device) -> None:
        self._device = device

    def current(self) -> MemoryReading:
        """`memory_allocated()` and `memory_reserved()` now."""
        return MemoryReading(
            torch.cuda.memory_allocated(self._device), torch.cuda.memory_reserved(self._device)
        )

    def reset_peak(self) -> None:
        """Start a new peak window (`reset_peak_memory_stats`)."""
        torch.cuda.reset_peak_memory_stats(self._device)

    def peak(self) -> MemoryReading:
        """`max_memory_allocated()` and `max_memory_reserved()` since the last reset."""
        return MemoryReading(
            torch.cuda.max_memory_allocated(self._device),
            torch.cuda.max_memory_reserved(self._device),
        )


def timer_for(device: torch.device) -> StepTimer:
    """CUDA events on a CUDA device, the monotonic clock elsewhere."""
    return CudaEventTimer(device) if device.type == "cuda" else MonotonicTimer()


def memory_meter_for(device: torch.device) -> CudaMemoryMeter | None:
    """The memory meter of a CUDA device; None elsewhere (memory fields stay null)."""
    return CudaMemoryMeter(device) if device.type == "cuda" else None
