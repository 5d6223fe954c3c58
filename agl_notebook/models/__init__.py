"""Model backends: the interface, the scripted model, and (imported lazily) Claude and OpenAI-compatible servers."""

from .base import Model, ModelEvent, ModelRequest, TextDelta, ToolCall, ToolSpec, TurnEnd, Usage
from .base import resolve_backend_id as claude_backend_id
from .scripted import ScriptedCall, ScriptedModel, ScriptedTurn

__all__ = [
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedTurn",
    "TextDelta",
    "ToolCall",
    "ToolSpec",
    "TurnEnd",
    "Usage",
    "resolve_backend_id",
    "resolve_model",
]


_resolved: dict[str, Model] = {}


def resolve_backend_id(model_id: str) -> str:
    """The backend id `resolve_model` gives for ``model_id``, without loading that backend (or its SDK).

    A fingerprint names the backend a live run would use; a replay needs that name, not the backend.
    """
    if model_id.startswith("openai:"):
        from .openai import backend_id_of_string  # no SDK: the module imports the openai client only to send

        return backend_id_of_string(model_id)
    return claude_backend_id(model_id)


def resolve_model(model_id: str) -> Model:
    """The backend for a model id string: Claude, or an OpenAI-compatible model for an ``"openai:..."`` string.

    Claude's backend is imported only now, as it costs about a second; ``"openai:<model>"`` and
    ``"openai:<model>@<server URL>"`` name a model on an OpenAI-compatible server
    (`agl_notebook.models.openai.model_from_string`).

    One backend per model id, so its client and connections are reused by every step.

    Raises:
        InputError: An ``"openai:"`` string is not of its form (the message names it).
    """
    if model_id.startswith("openai:"):
        from .openai import model_from_string

        return model_from_string(model_id)
    found = _resolved.get(model_id)
    if found is None:
        from .anthropic import AnthropicModel

        found = _resolved[model_id] = AnthropicModel.for_model(model_id)
    return found
