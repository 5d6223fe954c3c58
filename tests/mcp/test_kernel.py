"""MCP servers started in a real kernel: a restart and a SIGKILL of the kernel leave no server process behind.

The servers here are stubborn (tests/support/mcp_servers.py): they ignore SIGTERM and outlive their stdin, so only
agl_notebook's own measures end them: the exit hook at a restart, the parent-death signal at a SIGKILL.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.kernel_harness import Kernel, started_kernel

from .conftest import FAULT_SERVER, new_tag, processes, wait_until_gone

SETUP = f"""
import sys
from dataclasses import dataclass
from agl_notebook import MCPServer, Role, Run, ScriptedCall, ScriptedModel, ScriptedTurn, reporting_tool
from agl_notebook.replay.stores import MemoryStore

@dataclass
class Answer:
    text: str

def step_calling(tool, tag, **args):
    command = [{str(FAULT_SERVER)!r}, "stubborn", "--tag", tag]
    server = MCPServer.stdio("faults", sys.executable, command, call_timeout=600)
    role = Role("k", "Use the tools.", tools=[reporting_tool("report", "Report.", Answer)], mcp=[server])
    report = ScriptedTurn(calls=[ScriptedCall("report", {{"text": "ok"}})])
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall(tool, args)]), report])
    return Run(model=model, store=MemoryStore(), mode="auto").step(role, "go")
"""


def server_started(kernel: Kernel, tag: str, tool: str) -> str:
    msg_id = kernel.execute(
        f"await step_calling({tool!r}, {tag!r}, **({{'text': 'x'}} if {tool!r} == 'echo' else {{}}))"
    )
    deadline = time.monotonic() + 120
    while not processes(tag) and time.monotonic() < deadline and msg_id not in kernel.replies:
        kernel.pump(0.05)
    assert processes(tag), f"the server never started: {kernel.replies.get(msg_id)} {kernel.stream(msg_id)}"
    return msg_id


def test_a_kernel_restart_leaves_no_server_process(tmp_path: Path) -> None:
    tag = new_tag()
    with started_kernel(tmp_path, SETUP) as kernel:
        msg_id = server_started(kernel, tag, "echo")
        assert kernel.wait_reply(msg_id)["content"]["status"] == "ok"
        assert len(processes(tag)) == 1  # the session stays open for the next step
        kernel.km.restart_kernel(now=False)
        kernel.kc.wait_for_ready(timeout=60)
        assert wait_until_gone(tag) == []
        # After the restart, a server started anew (and hung in a call) is gone after a restart too.
        second = new_tag()
        kernel.run(SETUP)
        server_started(kernel, second, "hang")
        kernel.km.restart_kernel(now=False)
        kernel.kc.wait_for_ready(timeout=60)
        assert wait_until_gone(second) == []


def test_a_kernel_killed_outright_leaves_no_server_process(tmp_path: Path) -> None:
    tag = new_tag()
    with started_kernel(tmp_path, SETUP) as kernel:
        server_started(kernel, tag, "hang")  # killed mid-call
        os.kill(kernel.km.provisioner.pid, signal.SIGKILL)  # type: ignore[union-attr]
        assert wait_until_gone(tag) == []
