"""`implements`: whether a value offers a runtime-checkable protocol, checked once per class.

``isinstance`` against a `typing.Protocol` walks every attribute of the protocol on each call (about 15 µs on
Python 3.11), and a step asks several such questions of its model, unit, store and view. A protocol of methods only
is answered per class with ``issubclass``, once; a class that lacks the methods can still offer them on an instance
(attributes set in ``__init__``), so a no from the class falls back to the instance check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing's own from Python 3.13

P = TypeVar("P")

# Keyed by (class, protocol). A plain dict, not a WeakKeyDictionary, whose Python-level lookup cost a step about
# 1.5 µs: it holds each class it was asked about, a few per backend, store, unit and view class ever used.
_answers: dict[tuple[type[Any], type[Any]], bool] = {}


def implements(value: object, protocol: type[P]) -> TypeIs[P]:
    """``isinstance(value, protocol)`` for a ``@runtime_checkable`` protocol, with the class's answer cached."""
    key = (type(value), protocol)
    answer = _answers.get(key)
    if answer is None:
        try:
            answer = issubclass(key[0], protocol)
        except TypeError:  # a protocol with data members: only an instance can answer
            answer = False
        _answers[key] = answer
    return answer or isinstance(value, protocol)
