"""Settings: every environment variable agl_notebook reads or sets, in one table, each read when it is used.

Read at use time, never cached at import: ``%env AGL_NOTEBOOK_MODE=replay`` in a notebook, or a test's
``monkeypatch.setenv``, takes effect at the next step. `SETTINGS` is the table; docs/settings.md lists the same
variables for people (a test keeps the two in step). The values of variables whose names say they hold a secret
are read by `agl_notebook._secrets`, which scrubs them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from ._fieldwise import Fieldwise


@dataclass(frozen=True, eq=False, repr=False)
class Setting(Fieldwise):
    """One environment variable: its name, the values it takes and what it does."""

    name: str
    values: str
    """What it takes, and what it means unset."""
    meaning: str
    """What it does, and who sets it."""

    def get(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's value now (from ``environ``, default `os.environ`), or None when it is not set."""
        return (os.environ if environ is None else environ).get(self.name)

    def text(self, environ: Mapping[str, str] | None = None) -> str:
        """The value with surrounding white space dropped; ``""`` when it is not set."""
        return (self.get(environ) or "").strip()

    def is_on(self, environ: Mapping[str, str] | None = None) -> bool:
        """Whether the variable is set to ``1``."""
        return self.text(environ) == "1"


MODE = Setting(
    "AGL_NOTEBOOK_MODE",
    "auto, replay, refresh or off; unset: auto (replay under nbval)",
    "The replay mode below a step's, a Run's and %agl mode's. `agl-notebook execute --mode` sets it for its kernel.",
)
UNDER_NBVAL = Setting(
    "AGL_NOTEBOOK_UNDER_NBVAL",
    "1, or unset",
    "The default mode becomes replay. The pytest plugin sets it under --nbval for the kernels nbval starts.",
)
BLOCK_MODELS = Setting(
    "AGL_NOTEBOOK_BLOCK_MODELS",
    "1, or unset",
    "Any live model call (and any JSON-function api request) fails with ModelCallBlockedError. Set by the pytest "
    "plugin under --nbval and by `agl-notebook explain`.",
)
NOTEBOOK_PATH = Setting(
    "AGL_NOTEBOOK_PATH",
    "the path of an .ipynb file; unset: the notebook is found otherwise",
    "Names the notebook a kernel runs, whose saved recordings it replays. Set by the pytest plugin, "
    "`agl-notebook execute` and `explain`, and the papermill engine.",
)
PRICES_FILE = Setting(
    "AGL_NOTEBOOK_PRICES",
    "the path of a JSON price table; unset: the library's prices",
    "Rates that replace or add to the library's price table for every Run without prices= (docs/cost.md). Records "
    "keep the cost worked out when they were recorded, so it never changes a saved view.",
)
ANSWERS = Setting(
    "AGL_NOTEBOOK_ANSWERS",
    "a JSON list, or an object keyed by map, item and question; unset: a live question in a headless run fails with "
    "NoAnswerError",
    "The answers to the questions a headless run asks live: a list used in order; a run.map item's from the object "
    '{"<map key>": {"<item index>": {"<question text>": answer}}}. `agl-notebook execute --answers` sets it.',
)
RUNNER = Setting(
    "AGL_NOTEBOOK_RUNNER",
    "agl-notebook execute, papermill or nbval; unset: another runner (nbclient, nbconvert, jupyter execute)",
    "Which headless runner started the kernel, so an error tells its fix in that runner's terms (a question with "
    "no answer names --answers or AGL_NOTEBOOK_ANSWERS). Set by `agl-notebook execute`, the papermill engine and "
    "the pytest plugin under --nbval; nothing else reads it.",
)
APPROVALS = Setting(
    "AGL_NOTEBOOK_APPROVALS",
    "approve, deny, or the path of a JSON file of decisions; unset: a tool call that asks for approval in a "
    "headless run fails before its handler runs",
    "How a headless run decides on tool calls that need a person's approval: approve all, deny all, or the "
    "decisions in the file, keyed by tool and arguments. `agl-notebook execute --approvals` sets it.",
)
QUESTIONS = Setting(
    "AGL_NOTEBOOK_QUESTIONS",
    "widgets or stdin; unset: widgets on ipykernel 7.4 or later, else stdin",
    "How a kernel asks a person: input widgets in the step's view, or the kernel's stdin (input()).",
)
SIDECAR_BYTES = Setting(
    "AGL_NOTEBOOK_SIDECAR_BYTES",
    "a whole number of bytes; unset: 1000000",
    "How large a map's records may grow in the notebook: past it they move to a sidecar file beside the notebook "
    "(0: from the first record).",
)
JUPYTER_SESSION = Setting(
    "JPY_SESSION_NAME",
    "set by jupyter_server",
    "The notebook JupyterLab and Notebook 7 run the kernel for; read to find the notebook (before AGL_NOTEBOOK_PATH).",
)
ANTHROPIC_API_KEY = Setting(
    "ANTHROPIC_API_KEY",
    "an Anthropic API key; unset: no credentials",
    "Read by the anthropic SDK; when it (or ANTHROPIC_AUTH_TOKEN) is set, scripted_unless_credentials gives None, so "
    "steps run live on Claude. Never written to a record, a view, a log or an error.",
)
ANTHROPIC_AUTH_TOKEN = Setting(
    "ANTHROPIC_AUTH_TOKEN",
    "an Anthropic bearer token; unset: no token",
    "Read by the anthropic SDK instead of an API key. Never written anywhere.",
)
ANTHROPIC_BASE_URL = Setting(
    "ANTHROPIC_BASE_URL",
    "a URL; unset: the SDK's default",
    "Read by the anthropic SDK: where requests go. A change makes AnthropicModel make a new client.",
)
OPENAI_API_KEY = Setting(
    "OPENAI_API_KEY",
    "an OpenAI API key; unset: no key",
    "Read by OpenAIModel for OpenAI's own server only (another server's key is read from the variable its "
    "api_key_env names), when a request is made. Never written to a record, a view, a log or an error.",
)
OPENAI_BASE_URL = Setting(
    "OPENAI_BASE_URL",
    "a URL; unset: OpenAI's own server",
    "Where OpenAIModel(model) and a role's model string 'openai:<model>' send requests when they name no server, "
    "read when the backend is made (as the openai client reads it). OPENAI_API_KEY still goes to OpenAI's own "
    "server only.",
)

SETTINGS: tuple[Setting, ...] = (
    MODE,
    UNDER_NBVAL,
    BLOCK_MODELS,
    NOTEBOOK_PATH,
    PRICES_FILE,
    ANSWERS,
    RUNNER,
    APPROVALS,
    QUESTIONS,
    SIDECAR_BYTES,
    JUPYTER_SESSION,
    ANTHROPIC_API_KEY,
    ANTHROPIC_AUTH_TOKEN,
    ANTHROPIC_BASE_URL,
    OPENAI_API_KEY,
    OPENAI_BASE_URL,
)
"""Every environment variable agl_notebook reads by name."""

CREDENTIALS = (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN)
"""The variables that give the anthropic SDK credentials."""


def has_credentials(environ: Mapping[str, str] | None = None) -> bool:
    """Whether Anthropic credentials are set (a non-blank `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`)."""
    return any(setting.text(environ) for setting in CREDENTIALS)


def anthropic_configuration() -> tuple[str, ...]:
    """What the SDK reads from the environment now, to tell when a client made from it is out of date."""
    return tuple(setting.get() or "" for setting in (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL))


@contextmanager
def set_for_kernels(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, remove) environment variables for kernels started in the block; restore them after."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            _put(name, value)
        yield
    finally:
        for name, old in saved.items():
            _put(name, old)


def _put(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
