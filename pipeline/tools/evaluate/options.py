"""What `extract eval` can be asked: the number tolerance and the lists matched as sets; and its error."""

from __future__ import annotations

from dataclasses import dataclass


class EvalError(ValueError):
    """The gold file, the run or the output cannot be evaluated; the message names the problem."""


@dataclass(frozen=True)
class Tolerance:
    rel: float = 1e-6
    abs: float = 0.01


@dataclass(frozen=True)
class EvalOptions:
    tolerance: Tolerance = Tolerance()
    unordered: frozenset[str] = frozenset()  # list paths matched as sets, e.g. "items" or "order.lines"
    all_lists_unordered: bool = False

    def is_unordered(self, path: str) -> bool:
        return self.all_lists_unordered or path in self.unordered or path.removesuffix("[]") in self.unordered


DEFAULT_TOLERANCE = Tolerance()
DEFAULT_OPTIONS = EvalOptions()
