"""Occurrence numbering: identical steps are told apart by the order they start in."""

from __future__ import annotations


class Occurrences:
    """Numbers identical steps (same fingerprint) in the order they start, within one execution key."""

    def __init__(self) -> None:
        self._execution: object = None
        self._taken: dict[str, int] = {}

    def take(self, execution: object, base: str) -> int:
        """The next number for a step with fingerprint ``base``."""
        if execution != self._execution:  # a new cell execution starts counting again
            self._execution, self._taken = execution, {}
        number = self._taken.get(base, 0)
        self._taken[base] = number + 1
        return number

    def give_back(self, execution: object, base: str, number: int) -> None:
        """Give back the number of a failed step, unless an identical step has taken a later one since.

        A failed step recorded nothing: retrying it is the same step again, not the next one.
        """
        if execution == self._execution and self._taken.get(base) == number + 1:
            self._taken[base] = number
