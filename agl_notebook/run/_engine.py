"""The record-or-replay engine: one path for every unit of work (a step, a JSON-function call, a client-tools run).

Number the unit, tell its view, replay its record or run it live and keep one, and wipe it if it fails. A `run.map`
item (`Context.keeps_failures`) that fails leaves a failure record instead, which mode ``replay`` replays as a
`RecordedItemError` and mode ``auto`` runs live again (docs/map.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import _tally
from .._protocols import implements
from .._scope import CANCELLED_BY_INTERRUPT, current_scope
from ..errors import (
    InputError,
    MissingCredentialsError,
    ModelCallBlockedError,
    RecordedItemError,
    ReplayMissError,
    warn,
)
from ..events import StepFailed, StepReplayed, StepStarted, input_label
from ..payloads import JsonObject
from ..replay import modes
from ..replay.explain import Miss, RecordsWhenAsked, explain_miss, note_miss, note_used
from ..replay.modes import Mode
from ..replay.records import CellUse, RecordedFailure, StepRecord, recorded_failure, resume_refusal
from ..replay.stores import PartialStore, RecordingWarning, Store
from ..replay.versions import (
    ContentIndex,
    RecordIndex,
    VersionIndex,
    change_summary,
    deduplicated,
    keep_versions,
    previous_version,
    with_versions_kept,
)
from .environment import Environment
from .occurrences import Occurrences
from .units import Relisting, Resumable, TapedUnit, Unit
from .views import MissView, show_miss

Out = TypeVar("Out")


@dataclass
class Context:
    """Where units run: the store, the numbering and the host environment of one `Run`."""

    store: Store
    occurrences: Occurrences
    environment: Environment | None
    keeps_failures: bool = False
    """A `run.map` item's: a failure in mode ``auto`` or ``refresh`` keeps a failure record, mode ``replay`` replays
    one, and a failed item keeps its occurrence number (items are numbered in input order whatever their outcome)."""
    versions: MapVersions | None = None
    """A map's index of its previous records and their contents, built once (`MapVersions`); None for a step."""

    def execution_key(self) -> object:
        """What occurrence numbers count within: the whole Run, or a cell execution in a notebook."""
        return self.environment.execution_key() if self.environment is not None else None

    def cell_id(self) -> str | None:
        """The notebook cell running the unit, where known."""
        return self.environment.cell_id() if self.environment is not None else None


async def run_unit(unit: Unit[Out], mode: Mode, context: Context) -> Out:
    """Run or replay ``unit`` in ``mode``, emit its lifecycle events and tell its view; return its outcome.

    Everything before the first await runs as soon as this is awaited (the occurrence number is taken there).
    ``unit.unfit`` says why a found record can no longer be replayed (its result no longer builds the payload):
    such a record runs live in mode ``auto``, with a warning, and is a `ReplayMissError` in mode ``replay``.
    """
    __tracebackhide__ = True
    name, fp, view, scope, store = unit.name, unit.fingerprint, unit.view, unit.scope, context.store
    emit = scope.emit
    execution = context.execution_key()
    occurrence = context.occurrences.take(execution, fp.base)
    record_id = fp.with_occurrence(occurrence)
    token = current_scope.set(scope)
    env = context.environment
    watch = env.watch_interrupts() if env is not None else None
    kept: StepRecord | None = None
    partials = _partials(unit, store, mode)
    partial: StepRecord | None = None  # a partial record found: the step resumes from it
    waited = False  # a partial record was kept by this run, or resumed by it: a failure or an interrupt discards it
    # What the unit is counted as, and how it ended (agl_notebook._tally: the nbval summary of `make demo`).
    kind, kind_token = _tally.claim_kind(_unit_kind(unit, context))
    how: _tally.How = "failed"
    replays_failure = False  # a map item's recorded failure, replayed: its error is how it ends
    hooked: tuple[Callable[[], None], Callable[[], object] | None] | None = None  # (our on_waiting, the one before)
    try:
        # Told before the first await, so views take their places in the order steps start.
        input_json = unit.input_json
        emit(StepStarted(name, input_json, unit.backend, input_label(input_json) if unit.label is None else unit.label))
        if mode in ("auto", "replay"):
            await store.ready()  # a store that must hear from elsewhere first (the notebook's)
        found = store.get(record_id) if mode in ("auto", "replay") else None
        looked_up = found  # the store's record of this id now (a miss explained later reads it as it was)
        failed_before: StepRecord | None = None
        if found is not None and found.failure is not None:
            # A map item's failure record: replayed as its failure in mode replay only; mode auto runs it live.
            failed_before, found = found, None
        if found is not None and found.partial is not None:
            # Kept while the step waited for a person: resumed, never replayed as a finished step.
            partial, found = found, None
        if found is not None and found.finished and implements(unit, Relisting) and await unit.relisted(found, mode):
            # Its MCP servers, listed live, offer other tools than the record was made with: a miss that names them.
            found, fp = None, unit.fingerprint
        unfit_message: str | None = None
        nearest_unfit: StepRecord | None = None
        if found is not None and (problems := unit.unfit(found)):
            unfit_message = _no_longer_fits(found, name, problems, where=repr(store))
            if mode == "auto":
                warn(f"{unfit_message} The step runs live; its new record is kept in this session.", RecordingWarning)
            nearest_unfit, found = found, None
        if view is not None:
            view.begin(replaying=found is not None or (mode == "replay" and failed_before is not None))
        if watch is not None and watch.interrupted:
            # This cell was interrupted before the step began (a step under asyncio.gather starting after
            # another one noticed the interrupt): it does not run.
            import asyncio

            raise asyncio.CancelledError
        if found is not None:
            how = "replayed"
            emit(StepReplayed(name, found.id, found.backend))
            outcome = await unit.replay(found)
            kept = found
            _tell_kept(unit, found)
            note_used(context.cell_id(), execution, found.id)
        elif mode == "replay" and failed_before is not None:
            how, replays_failure = "replayed", True
            note_used(context.cell_id(), execution, failed_before.id)
            _tell_kept(unit, failed_before)
            raise _replayed_failure(failed_before, name, map_item=context.keeps_failures, where=repr(store))
        elif mode == "replay" and partial is not None:
            raise ReplayMissError(_partial_message(partial, name, where=repr(store)), nearest=partial, differing=())
        elif mode == "replay" and unfit_message is not None:
            raise ReplayMissError(
                f"{unfit_message} Mode 'replay' never calls a model: run it in mode 'auto' or "
                "'refresh' to record it again.",
                nearest=nearest_unfit,
                differing=(),
            )
        elif mode == "replay":
            message, nearest, differing = explain_miss(name, fp, occurrence, store.records(), where=repr(store))
            unlocated = _unlocated(store)
            raise ReplayMissError(
                f"{message} Mode 'replay' never calls a model: run it in mode 'auto' or 'refresh' to record it."
                + (f" {unlocated}" if unlocated else ""),
                nearest=nearest,
                differing=differing,
            )
        else:
            if partial is not None and (refusal := resume_refusal(partial, name)) is not None:
                raise InputError(refusal)  # before it counts as resumed: the partial record is kept as it is
            if mode == "auto" and unfit_message is None and partial is None:  # a miss to explain (not a resume)
                # A view that shows the miss now reads the records now; otherwise they are read if it is explained.
                shown_now = view is not None and implements(view, MissView)
                records = tuple(store.records()) if shown_now else RecordsWhenAsked(store.records, record_id, looked_up)
                miss = Miss(name, fp, occurrence, records, repr(store), context.cell_id())
                note_miss(miss)
                show_miss(view, miss)
            if unit.network:
                modes.refuse_blocked_call(unit.blocked)
                if mode == "auto":
                    _refuse_a_guess(store, unit.blocked)
            if partials is not None:
                keeper, resumable = partials
                waiting_before = scope.on_waiting

                def keep_partial() -> None:
                    nonlocal waited
                    if waiting_before is not None:
                        waiting_before()
                    if not scope.person_waits:  # a script or a setting answers at once: nothing to keep
                        return
                    found_partial = resumable.partial(record_id, occurrence, context.cell_id())
                    if found_partial is not None:
                        keeper.put_partial(found_partial)
                        waited = True

                scope.on_waiting = keep_partial
                hooked = (keep_partial, waiting_before)
            how = "live" if unit.network else "offline"
            try:
                if partial is not None and implements(unit, Resumable):
                    waited = True
                    outcome = await unit.resume(partial)
                else:
                    outcome = await unit.live()
            except MissingCredentialsError as e:
                if mode != "auto":
                    raise
                message, _, _ = explain_miss(name, fp, occurrence, store.records(), where=repr(store))
                raise MissingCredentialsError(
                    f"This step is not recorded, so it must run live. {message}\n\n{e}"
                ) from None
            if watch is not None and watch.interrupted:
                # The interrupt came while nothing yielded (a blocking tool): end as the cell's cancellation
                # would have. A CancelledError, not a KeyboardInterrupt: raised in a task of its own (a step
                # under asyncio.gather), a KeyboardInterrupt would escape the event loop and stop the kernel.
                import asyncio  # loaded already: a watch exists only on a running event loop

                raise asyncio.CancelledError
            if mode != "off":
                record = unit.record(record_id, occurrence, outcome, context.cell_id())
                if record.contents:  # a step of a role: it says what changed since its previous version
                    record = with_versions(record, mode, context)
                kept = store.put(record)
                _tell_kept(unit, kept)
                note_used(context.cell_id(), execution, kept.id)
    except BaseException as e:  # KeyboardInterrupt and cancellation wipe the step too
        if not replays_failure:
            how = "missed" if isinstance(e, ReplayMissError) else "failed"
        scope.wipe()
        if not context.keeps_failures:
            context.occurrences.give_back(context.execution_key(), fp.base, occurrence)
        if partials is not None and waited and _ends_partial(e, watch):
            try:
                partials[0].discard_partial(record_id)
            except Exception as discarding_error:  # a store failing here must not hide why the step failed
                e.add_note(f"(Its partial record was not discarded: {discarding_error})")
        if context.keeps_failures and mode in ("auto", "refresh") and isinstance(e, Exception):
            keep_failure(unit, record_id, occurrence, context, recorded_failure("failed", e), error=e)
        try:
            emit(StepFailed(name, type(e).__name__, str(e)))
            if view is not None:
                view.fail(e)
        except Exception as reporting_error:  # a broken view must not hide why the step failed
            e.add_note(f"(Drawing the failure failed too: {type(reporting_error).__name__}: {reporting_error})")
        if watch is not None and watch.interrupted and _is_interrupt(e):
            from ..interrupts import StepInterrupted, interrupted_message

            raise StepInterrupted(interrupted_message(name)) from None
        raise
    finally:
        if hooked is not None and scope.on_waiting is hooked[0]:
            # The hook holds the unit, whose scope holds the hook: left in place, that cycle kept the step's whole
            # plan (and a Run made for the step) for the garbage collector to find, instead of freeing it here.
            scope.on_waiting = hooked[1]
        current_scope.reset(token)
        _tally.release(kind_token)
        _tally.count(kind, how)
        if watch is not None:
            watch.cancel()
    emit(unit.finished(outcome))
    if view is not None:
        view.finish(kept)
    return outcome


class MapVersions:
    """A map's previous records by (role, input digest, occurrence) and their contents, indexed once per map.

    Built when the first item runs live (a map that replays whole never pays for it), from the records its store
    held then: the previous run's.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._built: tuple[VersionIndex, ContentIndex] | None = None

    def _build(self) -> tuple[VersionIndex, ContentIndex]:
        if self._built is None:
            records = self._store.records()
            use = running_cell(self._store)
            cell_id, source = (use.cell_id, use.source) if use is not None else (None, None)
            self._built = (VersionIndex(records, cell_id=cell_id, source=source), ContentIndex(records))
        return self._built

    @property
    def index(self) -> VersionIndex:
        """The previous records by (role, input digest, occurrence)."""
        return self._build()[0]

    @property
    def contents(self) -> ContentIndex:
        """The contents they (and the items recorded since) keep."""
        return self._build()[1]


def running_cell(store: Store) -> CellUse | None:
    """The notebook cell running now, as the notebook's store (or a map's, through its notebook's) tells it."""
    this_cell = getattr(store, "this_cell", None) or getattr(getattr(store, "parent", None), "this_cell", None)
    use = this_cell() if callable(this_cell) else None
    return use if isinstance(use, CellUse) else None


def with_versions(record: StepRecord, mode: Mode, context: Context) -> StepRecord:
    """``record`` with its change since its previous version, its contents kept once, and its replaced version.

    In mode ``refresh`` the version the record replaces is kept inside it (docs/iterating.md).
    """
    store = context.store
    replaced = store.get(record.id) if mode == "refresh" else None
    if replaced is not None and not replaced.finished:
        replaced = None
    versions = context.versions
    shared = False  # ``contents`` is the store's own index, which the store keeps up to date
    if versions is not None:
        contents = versions.contents
        previous = replaced or versions.index.previous(
            record.role, record.parts.get("input", ""), record.occurrence, record.id
        )
    else:
        use = running_cell(store)
        cell_id = record.cell_id or (use.cell_id if use is not None else None)
        source = use.source if use is not None else None
        input_digest = record.parts.get("input", "")
        indexed = getattr(store, "version_index", None)  # `IndexedStore`, asked as `_unlocated` asks
        if callable(indexed):
            # Kept up to date by the store: it holds ``replaced`` (a record of the store), and this record once put.
            index: RecordIndex = indexed()
            contents, shared = index.contents, True
            previous = replaced or index.previous(
                cell_id=cell_id,
                source=source,
                role=record.role,
                input_digest=input_digest,
                occurrence=record.occurrence,
                not_id=record.id,
            )
        else:
            records = store.records()
            contents = ContentIndex(records)
            previous = replaced or previous_version(
                records,
                cell_id=cell_id,
                source=source,
                role=record.role,
                input_digest=input_digest,
                occurrence=record.occurrence,
                not_id=record.id,
            )
    if replaced is not None:
        if not shared:
            contents.add(replaced)
        if replaced.result == record.result and replaced.parts == record.parts:
            # Refreshed to the same result: the same version again, which keeps its own change and its previous.
            own = _own_contents(record, contents, dropping=replaced, keeping=replaced.replaced)
            return with_versions_kept(record, contents=own, change=replaced.change, replaced=replaced.replaced)
    change = (
        change_summary(previous, record, contents, keep_result=versions is not None) if previous is not None else None
    )
    if change is not None and not change.get("differs"):
        change = None  # the same step again, with the same result: nothing to show
    kept_inside = _older_versions(replaced, keep_versions() - 1) if replaced is not None else None
    if replaced is not None:
        own = _own_contents(record, contents, dropping=replaced, keeping=kept_inside)
    else:
        own = deduplicated(record.contents, record.parts, contents)
    if not shared:
        contents.add(record)  # its full contents: the next item of a map finds them here
    if change is None and kept_inside is None and len(own) == len(record.contents):
        return record  # nothing to add or leave out (a first version)
    return with_versions_kept(record, contents=own, change=change, replaced=kept_inside)


def _own_contents(
    record: StepRecord, contents: ContentIndex, *, dropping: StepRecord, keeping: StepRecord | None
) -> JsonObject:
    """The contents ``record`` keeps itself when it replaces ``dropping`` and keeps ``keeping`` inside it.

    A content only the replaced record kept would be lost with it: the index is asked as it will stand once the
    record is put (the replaced record out, the versions kept inside in), then set back as the store keeps it.
    """
    contents.remove(dropping)
    if keeping is not None:
        contents.add(keeping)
    try:
        return deduplicated(record.contents, record.parts, contents)
    finally:
        if keeping is not None:
            contents.remove(keeping)
        contents.add(dropping)


def _tell_kept(unit: Unit[Any], record: StepRecord) -> None:
    """Hand a unit that asks (``kept``, a map item's step) the record it replayed or kept: a map reads its change."""
    if hasattr(unit, "kept"):
        unit.kept = record


def _older_versions(record: StepRecord, keep: int) -> StepRecord | None:
    """``record`` with at most ``keep`` versions in all (itself and those kept inside it)."""
    if keep < 1:
        return None
    inner = _older_versions(record.replaced, keep - 1) if record.replaced is not None else None
    return record if inner is record.replaced else dataclasses.replace(record, replaced=inner)


def _unit_kind(unit: Unit[Any], context: Context) -> _tally.Kind:
    """What ``unit`` is counted as unless its caller said (`_tally.counted_as`)."""
    if context.keeps_failures:
        return "map item"
    return "JSON-function call" if isinstance(unit, TapedUnit) else "step"


def failure_record(
    unit: Unit[Any], record_id: str, occurrence: int, cell_id: str | None, failure: RecordedFailure
) -> StepRecord:
    """The failure record of a map item that failed or never ran, under the id its finished record would have."""
    from ._step import now

    return StepRecord(
        id=record_id,
        parts=dict(unit.fingerprint.parts),
        occurrence=occurrence,
        role=unit.name,
        backend=unit.backend,
        input=unit.input_json,
        result=None,
        transcript=(),
        cell_id=cell_id,
        recorded_at=now(),
        failure=failure,
    )


def keep_failure(
    unit: Unit[Any],
    record_id: str,
    occurrence: int,
    context: Context,
    failure: RecordedFailure,
    *,
    error: BaseException | None = None,
) -> None:
    """Keep a map item's failure record, never in place of a finished record of its id (mode ``refresh``).

    A store failing here must not hide why the item failed: it becomes a note on ``error`` (or a warning).
    """
    store = context.store
    try:
        held = store.get(record_id)
        if held is not None and (held.finished or held.scrubbed_blocks):
            # The person's recording of the step stays (a partial one that cannot be resumed too, until a refresh
            # replaces it); the failure is shown, not kept.
            return
        record = failure_record(unit, record_id, occurrence, context.cell_id(), failure)
        versions = context.versions
        if versions is not None:  # a map item that fails now: newly failing when its previous version finished
            previous = versions.index.previous(record.role, record.parts.get("input", ""), occurrence, record_id)
            if previous is not None:
                record = dataclasses.replace(
                    record, change=change_summary(previous, record, versions.contents, keep_result=True)
                )
        kept = store.put(record)
        _tell_kept(unit, kept)
        note_used(context.cell_id(), context.execution_key(), kept.id)
    except Exception as keeping_error:
        if error is not None:
            error.add_note(f"(Its failure record was not kept: {keeping_error})")
        else:
            warn(f"A map item's failure record was not kept: {keeping_error}", RecordingWarning)


def _replayed_failure(record: StepRecord, name: str, *, map_item: bool, where: str) -> Exception:
    """What mode ``replay`` raises for a failure record: the item's recorded failure, or a miss for a lone step."""
    failure = record.failure
    assert failure is not None
    if map_item:
        return RecordedItemError(failure.type, failure.message, status=failure.status, record_id=record.id)
    ended = "was stopped before it ran" if failure.status == "not_run" else f"failed ({failure.type})"
    return ReplayMissError(
        f"The recording {record.id} of {name!r} in {where} is a map item's failure record: the item {ended} when it "
        "was recorded, and only a map item replays it. Mode 'replay' never calls a model: run it in mode 'auto' or "
        "'refresh' to record it.",
        nearest=record,
        differing=(),
    )


def _unlocated(store: Store) -> str | None:
    """Why ``store`` reads no records, when it cannot tell where they are and nobody watches (a headless kernel).

    `LocatedStore` has one method, so offering it is having a callable ``unlocated``: asked so rather than with
    ``isinstance`` against the protocol, which a store without it (every one but the notebook's) paid on each
    recorded step (``implements`` can only cache a yes).
    """
    unlocated = getattr(store, "unlocated", None)
    return unlocated() if callable(unlocated) else None


def _refuse_a_guess(store: Store, what: str) -> None:
    """Refuse a live call in mode ``auto`` where the store cannot tell where its records are (docs/notebooks.md).

    A headless kernel beside two notebooks holding its code (a duplicate, a backup, a runner's copy) would otherwise
    run every step live, spending money with a key, where the notebook it runs holds their recordings.
    """
    why = _unlocated(store)
    if why is not None:
        raise ModelCallBlockedError(f"{what}; a headless run refuses to, rather than go live on a guess. {why}")


def _partials(unit: Unit[Out], store: Store, mode: Mode) -> tuple[PartialStore, Resumable[Out]] | None:
    """Where a waiting step keeps its partial record, if it keeps one (docs/recordings.md, "Partial records")."""
    if mode == "off" or not implements(unit, Resumable) or not implements(store, PartialStore):
        return None
    return store, unit


def _partial_message(record: StepRecord, name: str, *, where: str) -> str:
    """What to say in mode ``replay`` of a partial record found for the step."""
    waiting = record.partial
    what = "a decision on" if waiting is not None and waiting.on == "approval" else "an answer in"
    tool = waiting.tool if waiting is not None else "a tool"
    return (
        f"The recording {record.id} of {name!r} in {where} is partial: the step was waiting for {what} its call to "
        f"{tool!r} and never finished. Mode 'replay' never calls a model: run it in mode 'auto' to resume it."
    )


def _ends_partial(error: BaseException, watch: object) -> bool:
    """Whether a step ending with ``error`` discards its partial record.

    A failure does, and so does an interrupt the person asked for (Kernel > Interrupt, or Ctrl-C outside a kernel,
    keeps nothing). In a kernel, a cancellation from elsewhere (the kernel shutting down for a restart, a sibling
    under ``asyncio.gather`` failing) does not: the step resumes when its cell runs again.
    """
    if not _is_interrupt(error) or watch is None:  # outside a kernel an interrupt is the person's Ctrl-C
        return True
    if getattr(watch, "interrupted", False):
        return True
    return error.args == (CANCELLED_BY_INTERRUPT,)


def _is_interrupt(error: BaseException) -> bool:
    import asyncio  # loaded already: only a step on a running event loop asks

    return isinstance(error, KeyboardInterrupt | asyncio.CancelledError)


def _no_longer_fits(record: StepRecord, name: str, problems: Sequence[str], *, where: str) -> str:
    """What to say of a matching recording whose result no longer builds the payload."""
    cell = f" (recorded in cell {record.cell_id})" if record.cell_id else ""
    return (
        f"The recording {record.id} of {name!r}{cell} in {where} no longer fits: its reported result does not "
        f"build the payload now: {'; '.join(problems)}. The recording is left as it is."
    )
