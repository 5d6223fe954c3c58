"""Model backends: the interface, the scripted model, and (imported lazily) Anthropic's Claude."""

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
    """The backend for a model id string: Anthropic's Claude (imported only now, as it costs about a second).

    One backend per model id, so its client and connections are reused by every step.
    """
    found = _resolved.get(model_id)
    if found is None:
        from .anthropic import AnthropicModel

        found = _resolved[model_id] = AnthropicModel.for_model(model_id)
    return found
