"""Reliability (docs/reliability.md): a planted secret at the exits of real kernels and of ``agl-notebook execute``.

The secret is a secret-named environment variable's value holding ``& ' " < >`` (and a space, where it must be
split across two streamed deltas). It reaches a JSON function's ``log`` line and its expression error
(`FunctionCallError`), an approval asked outside a step, and a step's streamed text, each plain, JSON-escaped,
``\\u``-escaped and HTML-escaped. Every place it could land is searched: the command's stdout and stderr, the
written notebook, its ``jupyter nbconvert --to html`` export, every iopub message of a kernel (widget states as
they changed, displays, streams, errors) and the saved outputs.
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from agl_notebook._secrets import scrub_text
from tests.support.functions_server import _every_char_escaped, _mixed
from tests.support.oracle_notebook import NOTEBOOK_SETTINGS
from tests.support.paths import ROOT
from tests.support.reliability_report import ReliabilityNotes

v4: Any = nbformat.v4  # untyped
pytestmark = pytest.mark.reliability  # its notes make docs/reliability.md (make reliability-report)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
BIN = Path(sys.executable).parent


def planted_token(*, space: bool = False) -> str:
    # Every character HTML escapes, and a quote of each kind (Python's repr escapes one of them as \').
    return "svc-<b>&'\"" + (" " if space else "") + secrets.token_hex(8)


def spellings(secret: str) -> set[str]:
    """The secret as written and in every spelling an exit could give it (JSON, \\u, HTML, Python's repr)."""
    as_json = json.dumps(secret)[1:-1]
    return {
        secret,
        as_json,
        json.dumps(as_json)[1:-1],
        _every_char_escaped(secret),
        _mixed(secret),
        html.escape(secret),
        html.escape(secret, quote=False),
        html.escape(as_json),
        repr(secret)[1:-1],
        repr(repr(secret)[1:-1])[1:-1],
        json.dumps(repr(secret)[1:-1])[1:-1],
        html.escape(repr(secret)[1:-1]),
        ascii(secret)[1:-1],
    }


def leaks(text: str, secret: str) -> list[str]:
    """Each spelling of ``secret`` in ``text`` (colour codes removed), and whether the scrubber still finds one."""
    text = _ANSI.sub("", text)
    found = [s for s in spellings(secret) if s in text]
    if scrub_text(text, [secret]) != text:
        found.append("a spelling the scrubber finds")
    return found


def kernel_code_forms() -> str:
    """Kernel code: ``forms``, the planted token (read from the environment) in every spelling, one string."""
    return (
        "import html, json, os\n"
        "token = os.environ['MY_SERVICE_TOKEN']\n"
        "as_json = json.dumps(token)[1:-1]\n"
        "forms = ' | '.join([token, as_json, json.dumps(as_json)[1:-1], html.escape(token),\n"
        "                    ''.join(f'\\\\u{ord(c):04x}' for c in token)])\n"
    )


def agl_notebook_command(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "agl-notebook"), *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def command_environment(token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NOTEBOOK_SETTINGS}
    return {**env, "MY_SERVICE_TOKEN": token, "PYTHONPATH": str(ROOT)}


def test_execute_leaves_no_secret_of_a_log_line_or_a_function_error_in_its_output_the_notebook_or_its_html(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    token = planted_token()
    env = command_environment(token)
    setup = (
        kernel_code_forms()
        + "import logging, sys\n"
        # One handler writes to the cell's stderr (saved in the notebook), one to the kernel's own stderr (the
        # command's); the marker shows that the second one reaches the command.
        + "logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True)\n"
        + "logging.getLogger().addHandler(logging.StreamHandler(sys.__stderr__))\n"
        + "print('kernel-stderr-reaches-the-command', file=sys.__stderr__, flush=True)\n"
    )
    call = (
        "from agl_notebook import Run\nfrom agl_notebook.functions import load_agent\n"
        "agent = load_agent({'functions': {'main': {'args': {'t': {}}, 'commands': [\n"
        "    {'log': '{ t }'}, {'log': \"{ {'held': [t], t: 1} }\"}, {'return': '{ int(t) }'}]}}})\n"
        "await agent.call('main', {'t': forms}, run=Run())"
    )
    failing = v4.new_code_cell(call)
    failing.metadata["tags"] = ["raises-exception"]  # nbclient keeps going, and the notebook is written
    notebook = tmp_path / "leaky.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(setup), failing]), notebook)  # type: ignore[no-untyped-call]
    written = tmp_path / "written.ipynb"

    kept = agl_notebook_command("execute", str(notebook), "--output", str(written), env=env)
    assert kept.returncode == 0, kept.stderr
    saved = written.read_text(encoding="utf-8")
    (error,) = [o for o in json.loads(saved)["cells"][1]["outputs"] if o["output_type"] == "error"]
    assert error["ename"] == "FunctionCallError" and "[REDACTED]" in error["evalue"], error
    assert "main: [REDACTED]" in saved, "the log line never reached the cell's stderr"
    exported = subprocess.run(
        [str(BIN / "jupyter"), "nbconvert", "--to", "html", "--stdout", str(written)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert "FunctionCallError" in exported.stdout

    # The same cell without the tag: the command stops, printing the cell's traceback and error to its stderr.
    failing.metadata["tags"] = []
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(setup), failing]), notebook)  # type: ignore[no-untyped-call]
    stopped = agl_notebook_command("execute", str(notebook), env=env)
    assert stopped.returncode != 0
    assert "raised FunctionCallError" in stopped.stderr and "[REDACTED]" in stopped.stderr, stopped.stderr
    for run in (kept, stopped):
        assert "kernel-stderr-reaches-the-command" in run.stderr
        assert "main: [REDACTED]" in run.stderr, "the log line never reached the kernel's stderr"

    places = {
        "the written notebook": saved,
        "its HTML export": exported.stdout,
        "the command's stdout (run kept going)": kept.stdout,
        "the command's stderr (run kept going)": kept.stderr,
        "the command's stdout (run stopped)": stopped.stdout,
        "the command's stderr (run stopped)": stopped.stderr,
        "the stopped notebook, left unchanged": notebook.read_text(encoding="utf-8"),
    }
    assert {where: leaks(text, token) for where, text in places.items() if leaks(text, token)} == {}
    reliability.note(
        "Secrets",
        "a secret-named variable's value holding & ' \" < > (plain, JSON-escaped, JSON in JSON, HTML-escaped, "
        "\\u-escaped) in a JSON function's `log` lines and in its FunctionCallError, run by `agl-notebook execute`",
        f"absent from the {len(places)} places searched: the written notebook (the error and the log lines on the "
        "cell's stderr), its `jupyter nbconvert --to html` export, and the command's stdout and stderr, the kernel's "
        "own stderr and the stopped run's traceback included",
        secrets_found=0,
        places_searched=len(places),
    )


# In a real kernel, as JupyterLab drives it ---------------------------------------------------------------------


def saved_outputs(kernel: Any, msg_id: str) -> list[Any]:
    """The cell's outputs as JupyterLab saves them (nbformat's own reading of each message, displays updated)."""
    outputs: list[Any] = []
    by_display: dict[str, int] = {}
    for msg in kernel.messages(msg_id, "display_data", "update_display_data", "execute_result", "stream", "error"):
        display_id = (msg["content"].get("transient") or {}).get("display_id")
        if msg["header"]["msg_type"] == "update_display_data":
            if display_id in by_display:
                shown = outputs[by_display[display_id]]
                shown["data"], shown["metadata"] = msg["content"]["data"], msg["content"]["metadata"]
            continue
        if display_id is not None:
            by_display[display_id] = len(outputs)
        outputs.append(v4.output_from_msg(msg))
    return outputs


def exported_html(tmp_path: Path, cells: list[tuple[str, list[Any]]]) -> tuple[str, str]:
    """The notebook a person would save (each cell's code and outputs) and its ``jupyter nbconvert --to html``."""
    notebook = v4.new_notebook(cells=[v4.new_code_cell(code, outputs=outputs) for code, outputs in cells])
    path = tmp_path / "saved.ipynb"
    nbformat.write(notebook, path)  # type: ignore[no-untyped-call]
    done = subprocess.run(
        [str(BIN / "jupyter"), "nbconvert", "--to", "html", "--stdout", str(path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return path.read_text(encoding="utf-8"), done.stdout


APPROVAL_SETUP = """\
from agl_notebook import Run
from agl_notebook.approvals import ApprovalRequest
from agl_notebook.payloads import dump, payload_spec
from tests.support.approvals import Forecast

spec = payload_spec(Forecast)
payload, _ = spec.validate({'place': {'city': forms, 'zip': token}, 'days': 2, 'units': [as_json, token]})
request = ApprovalRequest(f'weather', 'c1', payload, dump(payload), spec, 'forecaster', f'Forecast for {forms}.')
run = Run()
"""


def test_a_real_kernel_saves_no_secret_of_an_approval_asked_outside_a_step(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    from tests.support.kernel_harness import Kernel

    token = planted_token()
    kernel = Kernel(cwd=tmp_path, env={"MY_SERVICE_TOKEN": token, "PYTHONPATH": str(ROOT)})
    try:
        setup = kernel_code_forms() + APPROVAL_SETUP
        kernel.run(setup)
        ask = "decision = await run.terminal.approve(request)"
        asked = kernel.execute(ask)
        kernel.wait_for(lambda: any("decided" in kernel.widgets[c] for c in kernel.widget_ids("AnyModel")))
        (form,) = [c for c in kernel.widget_ids("AnyModel") if "decided" in kernel.widgets[c]]
        drawn = json.dumps(kernel.widgets[form])
        assert "[REDACTED]" in drawn
        # An edit the person got wrong (its problems drawn), then a denial whose message names the secret.
        bad = {**kernel.widgets[form]["arguments"], "days": 9}
        kernel.comm_msg(form, {"method": "custom", "content": {"kind": "edit", "attempt": 1, "arguments": bad}})
        kernel.wait_for(lambda: kernel.widgets[form].get("checked") == 1)
        assert kernel.widgets[form]["errors"], "the edit's problems were not drawn"
        denied = f"not for {token}"
        kernel.comm_msg(form, {"method": "custom", "content": {"kind": "deny", "message": denied}})
        assert kernel.wait_reply(asked)["content"]["status"] == "ok"
        # The call keeps the person's own words and the request its own arguments: only what is drawn is scrubbed.
        # (The code sent names no secret: the kernel echoes it in its messages.)
        kernel.run("assert decision.decision == 'deny' and decision.message == 'not for ' + token, decision")
        kernel.run("assert request.arguments['place']['zip'] == token")
        outputs = saved_outputs(kernel, asked)
        every_message = json.dumps(kernel.iopub, default=str)
    finally:
        kernel.close()
    final = json.dumps(outputs)
    assert "weather" in final and "[REDACTED]" in final, final
    saved, page = exported_html(tmp_path, [(setup, []), (ask, outputs)])
    places = {
        "the form's widget state as drawn": drawn,
        "every message the kernel sent (widget states as they changed, displays)": every_message,
        "the cell's saved outputs": saved,
        "the HTML export": page,
    }
    assert {where: leaks(text, token) for where, text in places.items() if leaks(text, token)} == {}
    reliability.note(
        "Secrets",
        "a secret-named variable's value holding & ' \" < > (plain, JSON-escaped, HTML-escaped, \\u-escaped) in the "
        "arguments and description of an approval asked outside a step (`run.terminal.approve`) in a real kernel, "
        "an edit refused, and a denial whose message names it",
        f"absent from the {len(places)} places searched: the approval form's widget state, every message the kernel "
        "sent, the cell's saved outputs and their `jupyter nbconvert --to html` export; the kernel kept the real "
        "arguments and the person's message",
        secrets_found=0,
        places_searched=len(places),
    )


STREAM_SETUP = """\
from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool
from agl_notebook.events import OutputTextDelta

@dataclass(frozen=True)
class Found:
    text: str = describe("What was found.")

finder = Role(name="finder", instructions="Find it.", tools=[reporting_tool("report", "Report.", Found)])
said = f"I found {forms} there."
events = []
run = Run(model=ScriptedModel([{"text": said, "calls": [{"name": "report", "args": {"text": "done"}}]}]),
          on_event=events.append)
"""


def test_a_real_kernel_saves_no_secret_of_a_steps_text_streamed_in_two_deltas(
    tmp_path: Path, reliability: ReliabilityNotes
) -> None:
    from tests.support.kernel_harness import Kernel

    token = planted_token(space=True)  # the scripted model streams word by word: the space splits the secret
    kernel = Kernel(cwd=tmp_path, env={"MY_SERVICE_TOKEN": token, "PYTHONPATH": str(ROOT)})
    try:
        setup = kernel_code_forms() + STREAM_SETUP
        kernel.run(setup)
        step = "(await run.step(finder, 'Find it.')).text"
        stepped = kernel.execute(step)
        assert kernel.wait_reply(stepped)["content"]["status"] == "ok", kernel.stream(stepped)
        kernel.run(
            "deltas = [e.delta for e in events if isinstance(e, OutputTextDelta)]\n"
            "assert ''.join(deltas) == said and not any(token in d for d in deltas), deltas\n"
            "assert any(d.endswith(token.split(' ')[0] + ' ') for d in deltas), deltas  # a delta ends mid-secret"
        )
        outputs = saved_outputs(kernel, stepped)
        every_message = json.dumps(kernel.iopub, default=str)
    finally:
        kernel.close()
    final = json.dumps(outputs)
    assert "I found [REDACTED]" in final, final
    saved, page = exported_html(tmp_path, [(setup, []), (step, outputs)])
    places = {
        "every message the kernel sent (the live view's widget states as they changed, displays)": every_message,
        "the cell's saved outputs, the step's record in their metadata": saved,
        "the HTML export": page,
    }
    places |= {
        f"the file {p.relative_to(tmp_path)} left in the notebook's folder": p.read_text(encoding="utf-8")
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file() and p.name != "saved.ipynb"
    }
    assert {where: leaks(text, token) for where, text in places.items() if leaks(text, token)} == {}
    reliability.note(
        "Secrets",
        "a secret-named variable's value holding & ' \" < > and a space (plain, JSON-escaped, HTML-escaped) in a "
        "step's text, streamed by the scripted model in two deltas split inside the secret, in a real kernel",
        f"absent from the {len(places)} places searched: every message the kernel sent (the live view as it was "
        "redrawn), the cell's saved outputs with the step's record, their `jupyter nbconvert --to html` export "
        "and every file in the notebook's folder",
        secrets_found=0,
        places_searched=len(places),
    )
