"""Equality, hash and repr by a dataclass's fields, written once for every class instead of generated for each.

On Python 3.11 `dataclasses.dataclass` compiles each method it generates, about 0.1 ms apiece, and importing
agl_notebook defines some eighty dataclasses: compiling them was most of the import's own time (see "Import time" in
docs/architecture.md). A class declared ``@dataclass(frozen=True, eq=False, repr=False)`` that
derives from `Fieldwise` behaves as the plain frozen dataclass would (the same ``==``, ``hash`` and ``repr``, field by
field, with ``compare``, ``hash`` and ``repr`` of `dataclasses.field` honoured) and costs about half as much to
define. Every frozen dataclass that ``import agl_notebook`` defines uses it; prefer it for a new one. Each call is a
little slower than a generated method's, so a class compared or hashed in a hot loop would keep the generated
methods (none on a step's path is: a profile of a live and a replayed step calls none of these).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, TypeAlias


class Fieldwise:
    """``__eq__``, ``__hash__`` and ``__repr__`` over the dataclass's fields, as `dataclasses.dataclass` writes them."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        compared = _methods(self.__class__)[0]
        return compared(self) == compared(other)

    def __hash__(self) -> int:
        return hash(_methods(self.__class__)[1](self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _methods(self.__class__)[2])
        return f"{self.__class__.__qualname__}({shown})"


Values: TypeAlias = Callable[[Any], tuple[Any, ...]]


Methods: TypeAlias = tuple[Values, Values, tuple[str, ...]]
_known: dict[type[Any], Methods] = {}


def _methods(cls: type[Any]) -> Methods:
    """What the class's methods read: the compared values, the hashed values, and the names its repr shows."""
    known = _known.get(cls)
    return known if known is not None else _known.setdefault(cls, _read(cls))


def _read(cls: type[Any]) -> Methods:
    fields = dataclasses.fields(cls)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    return _values(compared), _values(hashed), tuple(f.name for f in fields if f.repr)


def _values(names: tuple[str, ...]) -> Values:
    if not names:
        return lambda _: ()
    get = operator.attrgetter(*names)
    return get if len(names) > 1 else lambda obj: (get(obj),)
