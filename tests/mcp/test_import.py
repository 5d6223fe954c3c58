"""The `mcp` SDK and `jsonschema` load only when a server is started, not with agl_notebook or a role."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
import agl_notebook
assert "agl_notebook.mcp" not in sys.modules
from agl_notebook import MCPServer, Role
server = MCPServer.stdio("s", sys.executable, ["server.py"], env={"TOKEN": "x"})
Role("r", "Use it.", mcp=[server])
print(sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types", "jsonschema", "anyio", "httpx2")))
"""


def test_neither_the_sdk_nor_jsonschema_loads_with_a_role_that_has_a_server() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
