"""A worker for hostile sandbox attempts: each runs in a forked child capped in memory, watched by a wall clock.

Run as ``python -m tests.support.sandbox_worker``; it reads one JSON attempt a line on stdin and writes one JSON
result a line on stdout. An attempt is ``{"expression": source, "variables": [names]}`` (evaluated with the
named values of `VALUES`, built in the child) or ``{"agent": name}`` (an attack of `AGENTS`, a JSON-functions
agent called with a scripted model and in-process HTTP). The worker imports agl_notebook once; each attempt forks a
child that resets its peak RSS, caps its address space (``RLIMIT_AS``: what it had plus `CAP_BYTES`), runs the
attempt and reports how it ended: the error's type and whether it is an agl_notebook error, the seconds it took
(wall clock and CPU) and its memory growth (peak RSS less the RSS it started with). A child still running after
``wall`` seconds is killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

CAP_BYTES = 1_500_000_000
"""How much more address space a child may map than it had: a runaway attempt dies of MemoryError here, not the
machine."""

P = 2305843009213693951  # 2**61 - 1: every multiple of it hashes to 0


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


def _exc(message: str, body: Any = None) -> Any:
    from agl_notebook.functions.errors import ErrorInfo

    return ErrorInfo("ApiError", message, status=500, body=body)


VALUES: dict[str, Callable[[], Any]] = {
    "exc_big": lambda: _exc("m" * 1000, {"detail": "d" * 1000}),
    "exc_huge": lambda: _exc("x", [0.1234567890123] * 1_300_000),
    "big": lambda: 2**4095 - 1,
    "mod": lambda: 2**4095 - 3,
    "emoji": lambda: "😀" * 1_900_000,
    "nul": lambda: "\x00" * 3_000_000,
    "tuples": lambda: [(i * 7919 % 1_000_003,) for i in range(990_000)],
    "lists": lambda: [[0] * 180 + [i * 7919 % 20_000] for i in range(20_000)],
    "lists_copy": lambda: [[0] * 180 + [i * 7919 % 20_000] for i in range(20_000)],
    "deep": lambda: _deep(99),
    "alike_a": lambda: {i * P: 0 for i in range(30)},
    "alike_b": lambda: {i * P: 0 for i in range(30, 60)},
    "int_dict": lambda: {i: i for i in range(900_000)},
    "half": lambda: "x" * 1_999_000,
    "words": lambda: ["w" * 30] * 100_000,
}
"""The values an expression attempt may name, each built in the child that runs it (before its memory is
measured): built in the worker and shared with the child, they would be copied page by page as the attempt touched
their reference counts, and that copying would count as the attempt's growth."""


# Agent attacks -------------------------------------------------------------------------------------------------


def _call(agent: Any, function: str = "main", **kwargs: Any) -> Any:
    from agl_notebook import Run

    return asyncio.run(agent.call(function, run=Run(**kwargs)))


def _long_call_chain() -> Any:
    from agl_notebook.functions import load_agent

    n = 400
    functions: dict[str, Any] = {f"f{i}": {"commands": [{"func": f"f{i + 1}"}]} for i in range(n)}
    functions[f"f{n}"] = {"commands": [{"return": 1}]}
    return _call(load_agent({"functions": functions}), "f0")


def _deep_agent_text() -> Any:
    from agl_notebook.functions import load_agent

    depth = 950  # under the JSON parser's own limit: the checks that walk it used to recurse past Python's
    return load_agent('{"functions": {"main": {"commands": [{"return": ' + "[" * depth + "]" * depth + "}]}}}")


def _deep_agent_dict() -> Any:
    from agl_notebook.functions import load_agent

    value: Any = {}
    for _ in range(5000):
        value = {"if": {"condition": "{ True }", "then": [value]}}
    return load_agent({"functions": {"main": {"commands": [value]}}})


def _huge_integer_in_agent() -> Any:
    from agl_notebook.functions import load_agent

    return load_agent('{"functions": {"main": {"commands": [{"set": {"n": ' + "9" * 5000 + "}}]}}}")


def _deep_tool_input() -> Any:
    from agl_notebook import ScriptedCall, ScriptedModel, ScriptedTurn
    from agl_notebook.functions import load_agent

    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    agent = load_agent(
        {
            "model": "m",
            "functions": {
                "echo": {
                    "description": "Echoes its input.",
                    "args": {"value": {"type": "any", "description": "Anything."}},
                    "commands": [{"return": "{ value }"}],
                },
                "main": {"commands": [{"llm": {"prompt": "go", "tools": ["echo"]}}]},
            },
        }
    )

    def reply(request: Any) -> ScriptedTurn:
        return ScriptedTurn("", [ScriptedCall("echo", {"value": deep})])

    return _call(agent, model=ScriptedModel(reply))


def _many_large_responses() -> Any:
    import httpx2

    from agl_notebook.functions import load_agent

    body = json.dumps({"s": "y" * 3_900_000}).encode()

    def handler(request: Any) -> Any:
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    agent = load_agent(
        {
            "profiles": {"p": {"baseUrl": "https://api.example.com", "maxResponseBytes": 4_000_000}},
            "functions": {
                "main": {
                    "commands": [
                        {
                            "loop": {
                                "over": "{ range(150) }",
                                "max": 150,
                                "do": [
                                    {"api": {"profile": "p", "path": "/big"}},
                                    {"set": {"n": "{ len(result['s']) }"}},
                                ],
                            }
                        }
                    ]
                }
            },
        },
        transport=httpx2.MockTransport(handler),
    )
    return _call(agent)


def _error_body_agent(last: Any) -> Any:
    """An agent whose ``api`` call fails with a 100-KB error body (``exc.body``), then does ``last`` with ``e``."""
    import httpx2

    from agl_notebook.functions import load_agent

    body = json.dumps({"detail": "d" * 100_000}).encode()

    def handler(request: Any) -> Any:
        return httpx2.Response(500, content=body, headers={"content-type": "application/json"})

    return load_agent(
        {
            "profiles": {"p": {"baseUrl": "https://api.example.com"}},
            "functions": {
                "main": {
                    "commands": [
                        {"api": {"profile": "p", "path": "/fails", "onError": [{"set": {"e": "{ exc }"}}]}},
                        last,
                    ]
                }
            },
        },
        transport=httpx2.MockTransport(handler),
    )


def _log_of_many_errors() -> Any:
    # exc weighed 1 whatever it held: 100,000 copies of one holding a 100-KB body passed, then made 10 GB of log.
    return _call(_error_body_agent({"log": "{ [e] * 100000 }"}))


def _errors_returned() -> Any:
    return _call(_error_body_agent({"return": "{ {'errors': [e, e, e] * 20000} }"}))


def _errors_collected_in_a_loop() -> Any:
    return _call(
        _error_body_agent({"loop": {"over": "{ range(1000) }", "max": 1000, "do": [{"set": {"x": "{ [e] * 50 }"}}]}})
    )


AGENTS: dict[str, tuple[Callable[[], Any], str]] = {
    "a call chain 400 functions long": (_long_call_chain, "would make the call chain 101 functions deep"),
    "an agent file's JSON nested 950 levels deep": (_deep_agent_text, "nested more than 100 levels deep"),
    "an agent given as a dict with ifs nested 5,000 deep": (_deep_agent_dict, "nested more than 100 levels deep"),
    "an agent file with a 5,000-digit integer": (_huge_integer_in_agent, "(a number of 5,000 digits;"),
    "a model's tool input nested 5,000 levels deep": (_deep_tool_input, "with input nested more than 100 levels"),
    "150 API responses of 3.9 MB in one call": (_many_large_responses, "would make this call's recording larger"),
    "100,000 copies of an exc holding a 100-KB error body, logged": (_log_of_many_errors, "would be too large"),
    "60,000 copies of that exc returned": (_errors_returned, "would be too large"),
    "a loop collecting 50 copies of that exc per item, 1,000 items": (_errors_collected_in_a_loop, "too large"),
}
"""Each agent attack, and what the error that ends it must say."""


# The worker ----------------------------------------------------------------------------------------------------


def _attempt(attempt: dict[str, Any]) -> dict[str, Any]:
    from agl_notebook.errors import InputError, UpstreamUnexpected
    from agl_notebook.functions import evaluate

    variables = {name: VALUES[name]() for name in attempt.get("variables", [])}
    try:  # the peak RSS starts again from here (Linux 4.0+), else it is the worker's own
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass
    start_kb = _status_kb("VmRSS")
    cap = _status_kb("VmSize") * 1024 + CAP_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    started, cpu = time.monotonic(), time.process_time()
    error: BaseException | None = None
    try:
        if "expression" in attempt:
            evaluate(attempt["expression"], variables)
        else:
            AGENTS[attempt["agent"]][0]()
    except BaseException as e:
        error = e
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
    peak_kb = max(_status_kb("VmHWM"), start_kb)
    return {
        "seconds": round(elapsed, 3),
        "cpu_seconds": round(cpu, 3),
        "growth_mb": round((peak_kb - start_kb) / 1024, 1),
        "error": None if error is None else type(error).__name__,
        "agl_error": isinstance(error, InputError | UpstreamUnexpected),
        "message": "" if error is None else _ends(str(error)),
    }


def _ends(text: str) -> str:
    return text if len(text) <= 1200 else text[:400] + " … " + text[-800:]


def _run_one(attempt: dict[str, Any]) -> dict[str, Any]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        try:
            result = _attempt(attempt)
        except BaseException as e:
            result = {"error": type(e).__name__, "agl_error": False, "message": f"the worker failed: {e}"}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    wall = float(attempt.get("wall", 30))
    deadline = time.monotonic() + wall
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            return {"error": "killed", "agl_error": False, "message": f"still running after {wall:g} s"}
        time.sleep(0.01)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    if not data:
        return {"error": "died", "agl_error": False, "message": f"the child ended with status {status}"}
    answer: dict[str, Any] = json.loads(data)
    return answer


def main() -> None:
    """Answer attempts from stdin, one JSON line each, until it closes."""
    import agl_notebook.functions  # noqa: F401 - imported once, before the children fork

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(_run_one(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
