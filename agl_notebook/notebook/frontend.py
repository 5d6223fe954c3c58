"""The kernel's end of the link to the frontend extension, over a comm on the target ``agl_notebook``.

The protocol, version 1 (the extension's ``labextension/src/index.ts`` is the other end):

- kernel → frontend, on comm open: ``{"op": "hello", "version": 1}``; the frontend answers
  ``{"op": "records", "path": <notebook path>, "block": <metadata["agl_notebook"] as the model holds it now,
  saved or not>}``. That is how a restarted kernel gets recordings that were never saved.
- kernel → frontend: ``{"op": "record", "cell_id": <id or null>, "record": <record JSON>}`` for every finished step.
  The frontend writes it into the notebook metadata (replacing a record with the same id), removes the copy carried
  in the step's output metadata, and marks the notebook dirty; the person's next save keeps it. It answers
  ``{"op": "stored", "id": <record id>}``. A partial record (a step waiting for a person, docs/recordings.md) is sent
  the same way, when the step starts waiting; its finished record replaces it by id. A partial record never replaces
  a finished one with its id (a step waiting in mode ``refresh``): the frontend neither stores nor acknowledges it,
  and the kernel keeps it in its session only.
- kernel → frontend: ``{"op": "discard", "id": <record id>}`` when a waiting step was interrupted on purpose (or
  failed): the frontend removes the partial record with that id from the notebook metadata, never a finished one.
  It is sent `DISCARD_SECONDS` after the step ended, and not at all once the kernel is shutting down: a restart
  (JupyterLab's, through jupyter_client) interrupts the kernel before it asks it to shut down, and a restart must
  keep the partial record. A record sent for the id meanwhile (the step ran again and waits, or finished) cancels
  the discard, which would otherwise drop that newer partial record. An extension that predates the message ignores
  it; the kernel then ignores that partial copy for the rest of its session.
- kernel → frontend: ``{"op": "sidecar", "cell_id": <id or null>, "sidecar": <naming>}`` when a map's final
  display names its sidecar file (`agl_notebook.replay.sidecar.SidecarNaming`). The frontend keeps the naming in
  the notebook metadata block's ``"sidecars"`` list (replacing one of the same file), removes the copy from the
  output metadata, marks the notebook dirty, and answers ``{"op": "stored", "sidecar": <file>}``. The frontend's
  ``records`` answer carries the namings of its block too.

Without the extension (VS Code, classic Notebook, nbclient) the comm is simply not answered, or closed at once by a
frontend that knows no such target (JupyterLab with the extension disabled), and the record still travels in the
output metadata (path 2). Writes never wait for an answer.

The extension also reads two output metadata keys the view writes, with no message of this protocol
(``nbfile.LIVE_VIEW_KEY``: a live display, saved as its placeholder without its widget view;
``nbfile.PROVENANCE_KEY``: how a finished step's display came to be, drawn as a badge).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from ..replay.records import StepRecord, block_from_json
from ..replay.sidecar import SidecarNaming, namings_in_block
from ..replay.stores import merge_records
from . import _kernel

TARGET = "agl_notebook"
PROTOCOL = 1

DISCARD_SECONDS = 2.0
"""How long a discard waits to learn whether the interrupt that ended the step was a restart's (see above)."""


class FrontendLink:
    """One comm to the frontend extension, opened on first use; what it has learnt from the frontend."""

    def __init__(self) -> None:
        self._comm: Any = None
        self.answered = False
        """True once the frontend answered: the extension is there."""
        self.path: str | None = None
        """The notebook path the frontend reported."""
        self.unsaved: dict[str, StepRecord] = {}
        """The records the frontends' notebook models held when they answered (saved or not)."""
        self.stored: set[str] = set()
        """Ids of records the frontend acknowledged."""
        self.unsaved_sidecars: dict[str, SidecarNaming] = {}
        """The sidecar files the frontends' notebook models named when they answered, by file name."""
        self.stored_sidecars: set[str] = set()
        """Sidecar files whose naming the frontend acknowledged."""
        # Set from the comm's handler, which may run on a subshell thread: a threading.Event, not an asyncio one.
        self._hello = threading.Event()
        self._waited = False
        # Discards not sent yet, by record id. A record sent for the id cancels its discard: the step ran again and
        # waits (or finished), and a discard arriving after its new record would drop it. Held while sending either.
        self._discards: dict[str, threading.Timer] = {}
        self._sending = threading.Lock()

    def open(self) -> None:
        """Open the comm (once) and greet the frontend."""
        if self._comm is not None or not _kernel.in_kernel():
            return
        from comm import create_comm

        self._comm = create_comm(target_name=TARGET, data={"op": "hello", "version": PROTOCOL})
        self._comm.on_msg(self._on_msg)
        self._comm.on_close(self._on_close)

    async def wait_for_hello(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the frontend's answer, once per kernel; True when it came.

        Without the extension (nbclient, VS Code) nobody answers: that costs ``seconds`` once, then nothing. A
        frontend that closes the comm (JupyterLab without the extension: no such target) ends the wait at once.
        """
        if self._waited:
            return self.answered
        self._waited = True
        self.open()
        deadline = time.monotonic() + seconds
        # The answer is set from another thread, so it is a threading.Event: poll it rather than block the loop.
        while not self._hello.is_set() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        return self.answered

    def send_record(self, record: StepRecord, cell_id: str | None) -> None:
        """Hand a step's record, finished or partial, to the frontend (fire and forget).

        A discard of its id not sent yet is not sent at all: it would drop this newer record.
        """
        self.open()
        with self._sending:
            pending = self._discards.pop(record.id, None)
            if pending is not None:
                pending.cancel()
            if self._comm is not None:
                self._comm.send({"op": "record", "cell_id": cell_id, "record": record.to_json()})

    def discard_partial(self, record_id: str) -> threading.Timer | None:
        """Ask the frontend, soon, to drop the partial record with this id from the notebook metadata.

        Sent after `DISCARD_SECONDS` unless the kernel is shutting down by then, or a record with the id was sent
        meanwhile (`send_record`: a newer partial or finished record, which the discard must not drop). Fire and
        forget; the timer is returned for tests. A thread, not the event loop: a synchronous cell's step ran on a
        loop now closed.
        """
        comm = self._comm
        if comm is None:
            return None

        def send() -> None:
            with self._sending:
                if self._discards.get(record_id) is not timer:
                    return  # cancelled by a newer record, or replaced by a newer discard
                del self._discards[record_id]
                if not _kernel.shutting_down() and self._comm is comm:
                    comm.send({"op": "discard", "id": record_id})

        timer = threading.Timer(DISCARD_SECONDS, send)
        timer.daemon = True
        with self._sending:
            earlier = self._discards.get(record_id)
            if earlier is not None:
                earlier.cancel()
            self._discards[record_id] = timer
        timer.start()
        return timer

    def send_sidecar(self, naming: SidecarNaming, cell_id: str | None) -> None:
        """Hand a map's sidecar naming to the frontend (fire and forget), as a step's record is handed over."""
        self.open()
        if self._comm is not None:
            self._comm.send({"op": "sidecar", "cell_id": cell_id, "sidecar": naming.to_json()})

    def _on_close(self, msg: dict[str, Any]) -> None:
        # The frontend has no handler for the target: nobody will answer this comm. A later record opens a new one
        # (an extension enabled since, after a page reload, would answer it).
        self._comm = None
        self._hello.set()

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        op = data.get("op")
        if op == "records":
            self.answered = True
            self.path = data.get("path") if isinstance(data.get("path"), str) else None
            block = data.get("block")
            if block is not None:
                try:
                    read = block_from_json(block, where="the frontend's notebook metadata")
                except Exception:  # a frontend's bad block must not break the kernel; the file is read anyway
                    read = None
                if read is not None:
                    # Several notebooks may share one kernel (JupyterLab: "use the kernel of another notebook"),
                    # and each one's extension answers: keep every answer's records, not only the last one's.
                    # A partial record never replaces a finished one of the same id (merge_records).
                    self.unsaved = merge_records(self.unsaved, *({r.id: r} for r in read.records))
                    namings, _ = namings_in_block(block, where="the frontend's notebook metadata")
                    self.unsaved_sidecars = {**self.unsaved_sidecars, **{n.file: n for n in namings}}
            self._hello.set()
        elif op == "stored" and isinstance(data.get("id"), str):
            self.answered = True
            self.stored.add(data["id"])
        elif op == "stored" and isinstance(data.get("sidecar"), str):
            self.answered = True
            self.stored_sidecars.add(data["sidecar"])


_link: FrontendLink | None = None


def link() -> FrontendLink:
    """The kernel's one link to the frontend."""
    global _link
    if _link is None:
        _link = FrontendLink()
    return _link
