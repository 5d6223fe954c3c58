"""The oracle notebook the command-line tests run: a scripted role answers one question in one step.

Its cells: a markdown title, the role and its scripted model, a Run, the step, and a cell printing how many requests
the model served (1 when recorded live, 0 on a replay); `make_notebook` writes it, the other helpers read it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat as _nbformat

from agl_notebook._settings import RUNNER
from agl_notebook.notebook.locate import PATH_VARIABLE
from agl_notebook.notebook.nbfile import METADATA_KEY
from agl_notebook.replay.modes import BLOCK_VARIABLE, ENV_VAR, NBVAL_VARIABLE

SETUP = """from dataclasses import dataclass
from agl_notebook import Role, Run, ScriptedModel, describe, reporting_tool

@dataclass(frozen=True)
class Answer:
    text: str = describe("The answer.")

MODEL = ScriptedModel([{"calls": [{"name": "answer", "args": {"text": "forty-two"}}]}])
role = Role(name="oracle", instructions="Answer.", tools=[reporting_tool("answer", "Give the answer.", Answer)])"""

nbformat: Any = _nbformat  # partly typed; its notebook builders are not
v4: Any = _nbformat.v4

STEP = 'result = await run.step(role, "What is six times seven?")\nresult'


def make_notebook(path: Path, *extra: str) -> Path:
    """A markdown cell, then the scripted role, a Run, one step, the model's call count, and ``extra`` cells."""
    cells = [
        v4.new_markdown_cell("# The oracle"),
        v4.new_code_cell(SETUP),
        v4.new_code_cell("run = Run(model=MODEL)"),
        v4.new_code_cell(STEP),
        v4.new_code_cell("print(MODEL.calls)"),
        *map(v4.new_code_cell, extra),
    ]
    nbformat.write(v4.new_notebook(cells=cells), path)
    return path


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def output_records(nb: dict[str, Any]) -> list[Any]:
    return [
        o["metadata"][METADATA_KEY]
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if METADATA_KEY in o.get("metadata", {})
    ]


def printed_calls(nb: dict[str, Any]) -> str:
    (stream,) = nb["cells"][4]["outputs"]
    assert stream["output_type"] == "stream"
    return "".join(stream["text"]).strip()


def step_result(nb: dict[str, Any]) -> str:
    results = [o for o in nb["cells"][3]["outputs"] if o["output_type"] == "execute_result"]
    return "".join(results[0]["data"]["text/plain"])


RUNNER_VARIABLE = RUNNER.name
NOTEBOOK_SETTINGS = (ENV_VAR, PATH_VARIABLE, NBVAL_VARIABLE, BLOCK_VARIABLE, RUNNER_VARIABLE)
"""The settings a kernel, a notebook run or nbval sets: a test starts without them (``clean_environment``)."""
