"""The unit contract: what the record-or-replay engine runs, and what a unit of work other than a step gives back.

A unit is one piece of work a `Run` numbers, fingerprints, replays from its store or runs live and records: a step
of a role (`agl_notebook.run._step`), a top-level call of a JSON function (`Run.unit`, asked by
`agl_notebook.functions`), a client-tools run (a step). The run layer owns this contract; the layers above implement
it and never reach into the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from .._fieldwise import Fieldwise
from .._scope import StepScope
from ..errors import ReplayMissError
from ..events import StepFinished
from ..models.base import NO_USAGE, Usage
from ..payloads import JsonValue
from ..replay.fingerprint import Fingerprint
from ..replay.records import StepRecord
from ._step import now

if TYPE_CHECKING:
    from ..events import Event
    from ..replay.modes import Mode
    from .views import StepView

Out = TypeVar("Out")
Out_co = TypeVar("Out_co", covariant=True)


@dataclass(frozen=True, eq=False, repr=False)
class UnitOutcome(Fieldwise):
    """What one unit of work other than a step (a top-level call of a JSON function) leaves."""

    result: JsonValue
    """The call's result as JSON."""
    tape: tuple[JsonValue, ...]
    """Its effects, in order (model replies, API responses, answers); nothing secret."""
    usage: Usage = NO_USAGE
    """Tokens its model requests spent."""
    requests: int = 0
    """Model requests it made."""


Work = Callable[[Sequence[JsonValue] | None], Awaitable[UnitOutcome]]
"""Runs a call: live given None, replaying given a recorded tape."""


class Unit(Protocol[Out]):
    """One unit of work, resolved: what the engine needs to number, find, replay, run and record it."""

    @property
    def name(self) -> str:
        """Its name in events and records (a role's name, a function's name)."""
        ...

    @property
    def label(self) -> str | None:
        """Shown beside the name in its view (None: from the input)."""
        ...

    @property
    def input_json(self) -> JsonValue:
        """Its input as JSON."""
        ...

    @property
    def backend(self) -> str:
        """The backend it is recorded for."""
        ...

    @property
    def fingerprint(self) -> Fingerprint:
        """What identifies it (without the occurrence number)."""
        ...

    @property
    def network(self) -> bool:
        """A live run reaches a model or a server (so it is refused where model calls are blocked)."""
        ...

    @property
    def blocked(self) -> str:
        """The start of the message when a live run is refused: "A step of role 'x' would call a model"."""
        ...

    @property
    def view(self) -> StepView | None:
        """Its view, if any."""
        ...

    @property
    def scope(self) -> StepScope:
        """The scope it runs in (its events go to ``scope.emit``)."""
        ...

    def live(self) -> Awaitable[Out]:
        """Run it live."""
        ...

    def replay(self, record: StepRecord) -> Awaitable[Out]:
        """Replay it from ``record`` (no model, no server, no person)."""
        ...

    def record(self, record_id: str, occurrence: int, outcome: Out, cell_id: str | None) -> StepRecord:
        """The record of a live run."""
        ...

    def finished(self, outcome: Out) -> Event:
        """The event that ends it."""
        ...

    def unfit(self, record: StepRecord) -> Sequence[str]:
        """Why a matching record can no longer be replayed (empty: it can)."""
        ...


@runtime_checkable
class Resumable(Protocol[Out_co]):
    """A unit that can keep its progress while it waits for a person, and resume from it (a step of a role).

    docs/recordings.md, "Partial records": the engine asks for the partial record when the unit's scope begins
    waiting, and resumes from one found in the store instead of running live.
    """

    def partial(self, record_id: str, occurrence: int, cell_id: str | None) -> StepRecord | None:
        """Its progress so far as a partial record; None when it is not waiting inside a tool call."""
        ...

    def resume(self, partial: StepRecord) -> Awaitable[Out_co]:
        """Replay the partial record's prefix (no model, no handler of a finished call), then go on live."""
        ...


@runtime_checkable
class Relisting(Protocol):
    """A unit whose tools come from servers it may list live (a step of a role with MCP servers; docs/mcp.md)."""

    def relisted(self, record: StepRecord, mode: Mode) -> Awaitable[bool]:
        """Whether the tools listed live now differ from those ``record`` was made with: the step then misses.

        Its fingerprint's parts then hold the tools listed live, so the miss names the tool that changed.
        """
        ...


@dataclass
class TapedUnit:
    """A unit of work other than a step, run by a `Work` function: live with no tape, replayed from its tape."""

    name: str
    input_json: JsonValue
    backend: str
    fingerprint: Fingerprint
    network: bool
    view: StepView | None
    scope: StepScope
    work: Work
    cell_id: str | None = None
    label: str | None = None

    @property
    def blocked(self) -> str:
        """How a refused live run is told."""
        return f"A call of {self.name!r} would reach a model or a server"

    def live(self) -> Awaitable[UnitOutcome]:
        """Run the work with no tape: its effects go on a new one."""
        return self.work(None)

    async def replay(self, record: StepRecord) -> UnitOutcome:
        """Run the work on the recorded tape; it must give the recorded result."""
        __tracebackhide__ = True
        outcome = await self.work(record.tape)
        if outcome.result != record.result:
            raise ReplayMissError(
                f"The recording {record.id} of {self.name!r} does not replay to its own result: "
                "it is damaged. Run the call in mode 'refresh' to record it again.",
                nearest=record,
                differing=(),
            )
        return dataclasses.replace(outcome, usage=record.usage)

    def record(self, record_id: str, occurrence: int, outcome: UnitOutcome, cell_id: str | None) -> StepRecord:
        """The record of a live run: its result and its tape."""
        return StepRecord(
            id=record_id,
            parts=self.fingerprint.parts,
            occurrence=occurrence,
            role=self.name,
            backend=self.backend,
            input=self.input_json,
            result=outcome.result,
            transcript=(),
            usage=outcome.usage,
            cell_id=cell_id,
            recorded_at=now(),
            tape=outcome.tape,
        )

    def finished(self, outcome: UnitOutcome) -> Event:
        """``step.finished`` with the call's result."""
        return StepFinished(self.name, outcome.result, outcome.requests)

    def unfit(self, record: StepRecord) -> Sequence[str]:
        """A call's record always fits (a replay that diverges says so itself)."""
        return ()
