"""`is_model`: the Model protocol checked once per class, with the same answers as isinstance."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agl_notebook.models.base import Model, ModelEvent, ModelRequest, is_model
from agl_notebook.models.scripted import ScriptedModel


class _Backend:
    def backend_id(self, model: str) -> str:
        return f"test:{model}"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise NotImplementedError


class _Attributes:
    """A model whose methods are instance attributes (the class alone is not a Model)."""

    def __init__(self) -> None:
        backend = _Backend()
        self.backend_id = backend.backend_id
        self.stream = backend.stream


def test_is_model_answers_as_isinstance_does_for_classes_and_instance_attributes() -> None:
    cases: list[object] = [ScriptedModel([]), _Backend(), _Attributes(), object(), "claude-opus-5-5", None]
    for value in cases * 2:  # the second round answers from the per-class cache
        assert is_model(value) == isinstance(value, Model), value
    assert [is_model(v) for v in cases] == [True, True, True, False, False, False]
