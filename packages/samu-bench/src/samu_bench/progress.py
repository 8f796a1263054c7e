"""A rich progress display for a run: cases, and every step with an ETA."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from samu_bench.plan import CasePlan, ProtocolSettings
from samu_bench.protocol import StepEvent


class RunProgress:
    """Two bars: finished cases, and steps (warm-up and samples of every row) with an ETA.

    Use as a context manager; pass the instance as the protocol's step observer and call
    `case_finished` after each case.
    """

    def __init__(
        self, plans: Sequence[CasePlan], settings: ProtocolSettings, console: Console
    ) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
        )
        self._cases: TaskID = self._progress.add_task("cases", total=len(plans))
        self._steps: TaskID = self._progress.add_task(
            "steps",
            total=sum(
                settings.for_row(row).warmup + settings.for_row(row).samples
                for plan in plans
                for row in plan.rows
            ),
        )

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def __call__(self, event: StepEvent) -> None:
        """Advance the step bar and show the current case, row and phase."""
        phase = "warm-up" if event.phase == "warmup" else "sample"
        self._progress.update(
            self._steps,
            advance=1,
            description=f"{event.case} · {event.row} · {phase} {event.index + 1}",
        )

    def case_finished(self) -> None:
        """Advance the case bar."""
        self._progress.advance(self._cases)
