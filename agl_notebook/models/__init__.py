"""Model backends: the interface, the scripted model, and (imported lazily) Claude and OpenAI-compatible servers."""

from .base import Model, ModelEvent, ModelRequest, TextDelta, ToolCall, ToolSpec, TurnEnd, Usage, resolve_backend_id
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
