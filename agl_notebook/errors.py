"""The errors agl_notebook raises.

Two families, by whose move it was:

- `InputError`: what the person wrote is wrong (a payload type that can't be saved as JSON, an empty tool name,
  an input type the role doesn't accept, a missing prompt file). Raised as early as possible, usually when the thing
  is built rather than when the model first touches it.
- `UpstreamUnexpected`: the model, or something else upstream, did something the step cannot go on from (it never
  reported, it refused, its output was cut off inside a tool call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .transcript import Message


class InputError(ValueError):
    """Something given to agl_notebook is not usable; the message says what, where, and how to fix it."""


class UpstreamUnexpected(RuntimeError):
    """The model or another upstream service did something the step cannot continue from."""


class RoleIncompleteError(UpstreamUnexpected):
    """The agent stopped without reporting a result.

    The step's work is wiped; the transcript of what the agent did is kept here for debugging.
    """

    def __init__(self, message: str, *, role: str, transcript: Sequence[Message]) -> None:
        super().__init__(message)
        self.role = role
        """The name of the role whose step did not report."""
        self.transcript: tuple[Message, ...] = tuple(transcript)
        """Every message of the step, the agent's replies and the tool results, in order."""


class ModelRefusedError(UpstreamUnexpected):
    """The model declined to answer (stop reason `refusal`)."""


class ModelOutputTruncatedError(UpstreamUnexpected):
    """The model ran out of output tokens in the middle of a tool call, so the call cannot be read."""


class ScriptExhaustedError(UpstreamUnexpected):
    """A `ScriptedModel` was asked for a turn its script does not have."""


class NoAnswerError(UpstreamUnexpected):
    """A question was asked where nobody can answer it (no stdin, a headless run) and no answers were supplied."""


class MissingCredentialsError(UpstreamUnexpected):
    """A model that needs the network was asked for a reply, but no credentials for it were found.

    The message says how to get credentials, or how to run without them (a recording, or a `ScriptedModel`).
    """


class ModelCallBlockedError(UpstreamUnexpected):
    """A step would call a model where model calls are blocked (under nbval, or with AGL_NOTEBOOK_BLOCK_MODELS=1)."""


class ContextWindowExceededError(UpstreamUnexpected):
    """The step's conversation no longer fits the model's context window (``model_context_window_exceeded``)."""
