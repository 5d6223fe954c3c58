"""notebooks/10_mcp_tools.ipynb under nbval with the server's command unavailable: every step replays, and no
process of that command ever starts."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

from tests.support.nbval import nbval
from tests.support.paths import ROOT

NOTEBOOK = ROOT / "notebooks" / "10_mcp_tools.ipynb"
SERVER_LINE = 'units = MCPServer.stdio("units", sys.executable, ["../examples/mcp_server.py"], prefix="units_")'


def test_the_mcp_notebook_replays_under_nbval_with_the_server_command_unavailable(tmp_path: Path) -> None:
    # The command replaced by one that, if it ever ran, would leave a mark; no examples/ beside the copy, and a PATH
    # with no python on it.
    marker = tmp_path / "the-server-started"
    command = tmp_path / "units-server"
    command.write_text(f"#!/bin/sh\n: > {marker}\nexit 1\n", encoding="utf-8")
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    (index,) = [i for i, source in enumerate(sources) if SERVER_LINE in source]
    notebook["cells"][index]["source"] = sources[index].replace("sys.executable", repr(str(command)))
    copy = tmp_path / "notebooks" / NOTEBOOK.name
    copy.parent.mkdir()
    copy.write_text(json.dumps(notebook), encoding="utf-8")
    (tmp_path / "empty").mkdir()
    assert shutil.which("python", path=str(tmp_path / "empty")) is None

    done = nbval(copy, {"PATH": str(tmp_path / "empty")})

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "10_mcp_tools.ipynb: 2 steps replayed from its recordings; 0 model calls" in done.stdout
    assert not marker.exists(), "the server's command ran during the replay"
    # The server's question (clear_notes elicits) is kept with its call and told again by the replay.
    (asked,) = [q for r in notebook["metadata"]["agl_notebook"]["records"] for q in r.get("questions", [])]
    assert asked["answer"] == ["Accept", True, None] and asked["text"].startswith("Clear the 1 notes?"), asked
    assert asked["inputs"] == ["Response", "Confirm", "Keep, optional"], asked
