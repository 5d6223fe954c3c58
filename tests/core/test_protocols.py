"""`implements` and `is_model`: protocols checked once per class, with the same answers as isinstance."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from agl_notebook._protocols import implements
from agl_notebook.models.base import Model, ModelEvent, ModelRequest, is_model
from agl_notebook.models.scripted import ScriptedModel
from agl_notebook.replay.stores import MemoryStore, PartialStore, Store


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


def test_implements_answers_as_isinstance_for_the_engines_protocols_and_a_protocol_with_data() -> None:
    @runtime_checkable
    class Named(Protocol):
        name: str

    class HasName:
        def __init__(self) -> None:
            self.name = "x"

    cases: list[tuple[object, type[Any]]] = [
        (MemoryStore(), Store),
        (MemoryStore(), PartialStore),
        (object(), PartialStore),
        (HasName(), Named),  # a data member: the class cannot answer, the instance does
        (object(), Named),
    ]
    for value, protocol in cases * 2:
        assert implements(value, protocol) == isinstance(value, protocol), (value, protocol)
    assert implements(HasName(), Named) and not implements(object(), PartialStore)
