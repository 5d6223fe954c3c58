"""The frontend extension's side of the comm (labextension/src/link.ts), played by a test over a real kernel.

It keeps the records the kernel sends in "the notebook model's metadata" (and the sidecar namings of maps), a partial
record never in place of a finished one, drops a partial record when the kernel says to discard it, and hands the
block to a restarted kernel when it says hello: recordings never saved.
"""

from __future__ import annotations

from typing import Any

from tests.support.kernel_harness import Kernel


class FakeExtension:
    """Answers the kernel's hello and keeps its records, as the extension keeps them in the notebook metadata."""

    def __init__(self, k: Kernel, path: str) -> None:
        self.k, self.path = k, path
        self.seen = 0
        self.answered: set[str] = set()
        self.block: dict[str, Any] | None = None
        self.received: list[dict[str, Any]] = []
        """Every message of the protocol the kernel sent, in order."""

    def serve(self) -> None:
        """Answer every hello and handle every message that arrived since the last call."""
        for msg in self.k.iopub[self.seen :]:
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "comm_open" and content.get("target_name") == "agl_notebook":
                if content["comm_id"] not in self.answered:
                    self.answered.add(content["comm_id"])
                    self.k.comm_msg(content["comm_id"], {"op": "records", "path": self.path, "block": self.block})
            elif kind == "comm_msg" and content["data"].get("op") in ("record", "discard", "sidecar"):
                data = content["data"]
                self.received.append(data)
                block = self.block or {"version": 1, "records": []}
                records = block["records"]
                if data["op"] == "record":
                    record = data["record"]
                    if "partial" in record and any(r["id"] == record["id"] and "partial" not in r for r in records):
                        continue  # a partial record never replaces a finished one: neither stored nor acknowledged
                    self.block = {**block, "records": [*[r for r in records if r["id"] != record["id"]], record]}
                    self.k.comm_msg(content["comm_id"], {"op": "stored", "id": record["id"]})
                elif data["op"] == "sidecar":  # a map's sidecar naming, kept beside the records by its file
                    naming = data["sidecar"]
                    namings = [n for n in block.get("sidecars", []) if n["file"] != naming["file"]]
                    self.block = {**block, "sidecars": [*namings, naming]}
                    self.k.comm_msg(content["comm_id"], {"op": "stored", "sidecar": naming["file"]})
                else:
                    kept = [r for r in records if not (r["id"] == data["id"] and "partial" in r)]
                    self.block = {**block, "records": kept}
        self.seen = len(self.k.iopub)

    def records(self) -> list[dict[str, Any]]:
        """The records "the notebook metadata" holds now."""
        self.serve()
        return list((self.block or {"records": []})["records"])

    def wait_for(self, condition: Any, timeout: float = 30) -> None:
        """Pump the kernel's messages, serving them, until ``condition()``."""

        def served() -> bool:
            self.serve()
            return bool(condition())

        self.k.wait_for(served, timeout)
