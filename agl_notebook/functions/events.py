"""What a running function tells the views, beside the loop's own events (model text, tool calls, questions).

The events themselves live in `agl_notebook.events`, the one vocabulary every sink and view takes; this module
names the ones a running function emits. None of them carries a secret: URLs are the public part (no query
value read from the environment), messages are scrubbed of every profile secret, and request headers never
appear. None carries a time, so a replayed call draws the same view as the live one.
"""

from __future__ import annotations

from ..events import (
    ApiRequested,
    ApiResponded,
    CommandStarted,
    ErrorHandled,
    FunctionCalled,
    FunctionEvent,
    FunctionReturned,
    Logged,
)

__all__ = [
    "ApiRequested",
    "ApiResponded",
    "CommandStarted",
    "ErrorHandled",
    "FunctionCalled",
    "FunctionEvent",
    "FunctionReturned",
    "Logged",
]
