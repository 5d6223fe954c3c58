"""Loading and validating agent files (docs/functions.md, "The agent file").

Every problem is reported at once, each with its JSON path and a sentence a person can act on, before anything runs.
An agent file is JSON; its JSON Schema, for editors, is `agl_notebook.functions.schema_path()`.

The checks, by concern, each in its own module:

- ``reading.py``: the JSON, every pair kept (a repeated key in a command block is a second command), and problems
  named by JSON paths (`Problem`, `AgentInvalidError`).
- ``checker.py``: what every check uses: fields, names, declared arguments, templates (values with expressions).
- ``profiles.py``: profiles, and the rule that no secret is written in an agent file.
- ``commands.py``: command blocks and each command's arguments.
- ``flow.py``: variable flow in error handlers.
- ``calls.py``: the call graph: calls, tools offered to a model, cycles, what a tool or a handler may reach.
- ``agent.py``: the whole file, in that order; `check_agent` and `build_agent`.
"""

from __future__ import annotations

from .agent import build_agent, check_agent
from .checker import RESERVED
from .commands import COMMANDS, HTTP_METHODS, INPUTS, MAX_LOOP
from .profiles import sensitive_name
from .reading import AgentInvalidError, PairedObject, Problem, key_path, pairs_of, parse_json, read_source

__all__ = [
    "COMMANDS",
    "HTTP_METHODS",
    "INPUTS",
    "MAX_LOOP",
    "RESERVED",
    "AgentInvalidError",
    "PairedObject",
    "Problem",
    "build_agent",
    "check_agent",
    "key_path",
    "pairs_of",
    "parse_json",
    "read_source",
    "sensitive_name",
]
