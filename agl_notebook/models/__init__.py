"""Model backends: the interface, the scripted model, and (imported lazily) Anthropic's Claude."""

from .base import Model, ModelEvent, ModelRequest, TextDelta, ToolCall, ToolSpec, TurnEnd, Usage
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
    "resolve_model",
]


def resolve_model(model_id: str) -> Model:
    """The backend for a model id string: Anthropic's Claude (imported only now, as it costs about a second)."""
    from .anthropic import AnthropicModel

    return AnthropicModel.for_model(model_id)
