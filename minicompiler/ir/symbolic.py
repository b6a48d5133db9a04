"""Symbolic sizes: a dim that may change between calls is a symbol (`s0`), not a number.

With dynamic shapes a graph is captured once for sizes like `(16, s0, 256)`, and every size
computed from them is a `SymSize`: a polynomial in the symbols with integer coefficients
(`16*s0`, `4096*s0 + 256`). Each symbol keeps the size it had on the call being compiled, its
*hint*, the way TorchInductor's size variables do.

A compiler pass written for ints mostly just works on SymSizes: `+ - *` build new polynomials,
and a comparison (`size == 1`, `rows > 1024`) is answered from the hints, *and recorded as a
guard* (`s0 != 256`) unless the symbols' lower bound already decides it (every symbol is >= 2:
sizes 0 and 1 are never symbolic, they change broadcasting). The recorded guards are checked
on every later call, so a decision made for one size is never reused for a size it is wrong
for: that call compiles again instead.

Anything that needs a plain int (`int(s)`, `range(s)`, `str(s)`, a torch call) *specializes*:
it gets the hint and the guard `s0 == 32`. That is always correct, only less general, and the
report lists such guards. Code that means to keep a size symbolic prints it with `size_code`,
e.g. the wrapper's `torch.empty((16, s0, 256))` after `s0 = x.shape[1]`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Monomial = tuple[str, ...]  # the symbols multiplied, sorted, repeats kept: ("s0", "s0", "s1")
MAX_REMEMBERED_SIZES = 1024  # sets of symbol values whose guard checks are remembered
LOWER_BOUND = 2  # every symbol is at least this (the dynamic dims' guards say so)

RELATIONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


@dataclass(frozen=True)
class SizeGuard:
    """`left relation right`, where both sides are sizes; checked with a call's symbol values."""

    left: Any  # SymSize or int
    relation: str
    right: Any

    def holds(self, values: Mapping[str, int]) -> bool:
        return RELATIONS[self.relation](evaluate(self.left, values), evaluate(self.right, values))

    def __str__(self) -> str:
        return f"{size_code(self.left)} {self.relation} {size_code(self.right)}"


@dataclass
class SizeEnv:
    """The symbols of one compilation (with their hints) and the guards its decisions made."""

    hints: dict[str, int] = field(default_factory=dict)
    guards: list[SizeGuard] = field(default_factory=list)
    _texts: set[str] = field(default_factory=set)  # the guards as text: each is kept once
    _checked: dict[tuple[int, ...], int] = field(default_factory=dict)  # symbol values -> guards they pass

    def symbol(self, hint: int) -> SymSize:
        name = f"s{len(self.hints)}"
        self.hints[name] = hint
        return SymSize({(name,): 1}, self)

    def record(self, guard: SizeGuard) -> None:
        def order(side: Any) -> tuple[bool, str]:  # symbols first, then by text
            return not isinstance(side, SymSize), size_code(side)

        if guard.relation in ("==", "!=") and order(guard.left) > order(guard.right):
            guard = SizeGuard(guard.right, guard.relation, guard.left)  # s1 == s2 and s2 == s1: one guard
        if str(guard) not in self._texts:
            self._texts.add(str(guard))
            self.guards.append(guard)

    def holds(self, values: Mapping[str, int]) -> bool:
        return all(guard.holds(values) for guard in self.guards)

    def first_failing(self, values: Mapping[str, int]) -> SizeGuard | None:
        """The first guard these symbol values fail. Guards are only ever added, so for values
        seen before only the guards added since are checked (this runs on every call)."""
        key = tuple(values.values())
        for guard in self.guards[self._checked.get(key, 0):]:
            if not guard.holds(values):
                return guard
        if len(self._checked) >= MAX_REMEMBERED_SIZES:
            self._checked.clear()
        self._checked[key] = len(self.guards)
        return None


class SymSize:
    """A size that is a polynomial in the symbols of `env` (never a constant: those are ints)."""

    __slots__ = ("terms", "env")

    def __init__(self, terms: dict[Monomial, int], env: SizeEnv) -> None:
        self.terms, self.env = terms, env

    # -- building ------------------------------------------------------------------------
    @staticmethod
    def make(terms: dict[Monomial, int], env: SizeEnv) -> SymSize | int:
        terms = {m: c for m, c in terms.items() if c != 0}
        if not any(terms):  # only the constant term is left: a plain int
            return terms.get((), 0)
        return SymSize(terms, env)

    def _terms_of(self, other: Any) -> dict[Monomial, int] | None:
        if isinstance(other, SymSize):
            return other.terms
        if isinstance(other, int) and not isinstance(other, bool):
            return {(): other}
        return None

    def __add__(self, other: Any) -> Any:
        if isinstance(other, float):  # a float result is no size: this call's number
            return int(self) + other
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        total = dict(self.terms)
        for m, c in terms.items():
            total[m] = total.get(m, 0) + c
        return SymSize.make(total, self.env)

    __radd__ = __add__

    def __neg__(self) -> Any:
        return SymSize.make({m: -c for m, c in self.terms.items()}, self.env)

    def __sub__(self, other: Any) -> Any:
        return self + (-other) if self._terms_of(other) is not None or isinstance(other, float) else NotImplemented

    def __rsub__(self, other: Any) -> Any:
        return (-self) + other if self._terms_of(other) is not None or isinstance(other, float) else NotImplemented

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, float):
            return int(self) * other
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        return SymSize.make(_multiply(self.terms, terms), self.env)

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> Any:
        """Exact when `other` (a number or one term like `4*s0`) divides every term; otherwise
        the division is done on the specialized value."""
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        if len(terms) == 1:
            (divisor, coefficient), = terms.items()
            quotient = {}
            for m, c in self.terms.items():
                rest = _remove(m, divisor)
                if rest is None or c % coefficient:
                    break
                quotient[rest] = c // coefficient
            else:
                return SymSize.make(quotient, self.env)
        return int(self) // int(other)

    def __rfloordiv__(self, other: Any) -> Any:
        return other // int(self) if self._terms_of(other) is not None else NotImplemented

    def __mod__(self, other: Any) -> Any:
        quotient = self // other
        if isinstance(quotient, SymSize) or isinstance(other, SymSize):
            return self - quotient * other
        return int(self) % other

    def __rmod__(self, other: Any) -> Any:
        return other % int(self) if self._terms_of(other) is not None else NotImplemented

    def __truediv__(self, other: Any) -> float:
        return int(self) / other

    def __rtruediv__(self, other: Any) -> float:
        return other / int(self)

    def __pow__(self, other: Any) -> Any:
        return int(self) ** other

    # -- deciding ------------------------------------------------------------------------
    def _compare(self, other: Any, relation: str) -> Any:
        terms = self._terms_of(other)
        if terms is None:
            return NotImplemented
        difference = self - other
        if isinstance(difference, int):  # the symbols cancel: decided for every size
            return RELATIONS[relation](difference, 0)
        decided = difference._decided_by_bounds(relation)
        if decided is not None:
            return decided
        outcome = RELATIONS[relation](self.hint, evaluate(other, self.env.hints))
        self.env.record(SizeGuard(self, relation if outcome else NEGATED[relation], other))
        return outcome

    def _decided_by_bounds(self, relation: str) -> bool | None:
        """`self relation 0` when it holds, or fails, for every value of the symbols >= 2.

        Written in t = s - 2 (so t >= 0), a polynomial whose coefficients are all >= 0 is
        smallest at t = 0, one whose coefficients are all <= 0 largest there: s1*s2 - s2 is
        t1*t2 + 2*t1 + t2 + 2, never below 2."""
        shifted: dict[Monomial, int] = {}
        for m, c in self.terms.items():
            term = {(): c}
            for name in m:  # s = t + 2
                term = _multiply(term, {(name,): 1, (): LOWER_BOUND})
            for mt, ct in term.items():
                shifted[mt] = shifted.get(mt, 0) + ct
        variable = [c for m, c in shifted.items() if m and c != 0]
        at_bound = shifted.get((), 0)
        if all(c > 0 for c in variable):  # grows with every symbol: the bound is its minimum
            low, high = at_bound, math.inf
        elif all(c < 0 for c in variable):
            low, high = -math.inf, at_bound
        else:
            return None
        if relation in ("==", "!="):
            return None if low <= 0 <= high else relation == "!="
        if relation in (">", ">="):
            holds_always = low > 0 if relation == ">" else low >= 0
            fails_always = high <= 0 if relation == ">" else high < 0
        else:
            holds_always = high < 0 if relation == "<" else high <= 0
            fails_always = low >= 0 if relation == "<" else low > 0
        return True if holds_always else False if fails_always else None

    def __eq__(self, other: object) -> Any:
        return self._compare(other, "==")

    def __ne__(self, other: object) -> Any:
        return self._compare(other, "!=")

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=")

    def __bool__(self) -> bool:
        return bool(self != 0)

    def __hash__(self) -> int:
        return hash(self.hint)  # equal sizes hash alike: a dict lookup compares them, and guards

    # -- specializing --------------------------------------------------------------------
    @property
    def hint(self) -> int:
        return evaluate(self, self.env.hints)

    def __index__(self) -> int:
        """Where a plain int is needed: this call's value, guarded to stay it."""
        value = self.hint
        self.env.record(SizeGuard(self, "==", value))
        return value

    __int__ = __index__

    def __float__(self) -> float:
        return float(int(self))

    def __abs__(self) -> Any:
        return self if self >= 0 else -self

    def __str__(self) -> str:
        return str(int(self))  # what Python code (an f-string, print) would see: the number

    def __repr__(self) -> str:
        return repr(int(self))

    def __format__(self, spec: str) -> str:
        return format(int(self), spec)

    def code(self, names: Mapping[str, str] | None = None) -> str:
        """The polynomial as Python (and C) source over the symbols' names: `16*s0 + 1`
        (`names` renames symbols, e.g. to the size arguments of a kernel)."""
        parts = []
        for m, c in sorted(self.terms.items(), key=lambda item: (-len(item[0]), item[0])):
            factors = ([str(abs(c))] if abs(c) != 1 or not m else []) + [names[n] if names else n for n in m]
            parts.append(("-" if c < 0 else "+", "*".join(factors)))
        text = " ".join(f"{sign} {part}" for sign, part in parts).removeprefix("+ ")
        return text if not text.startswith("- ") else "-" + text[2:]

    def symbols(self) -> set[str]:
        return {name for m in self.terms for name in m}


def _multiply(a: dict[Monomial, int], b: dict[Monomial, int]) -> dict[Monomial, int]:
    product: dict[Monomial, int] = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = tuple(sorted(m1 + m2))
            product[m] = product.get(m, 0) + c1 * c2
    return product


def _remove(monomial: Monomial, divisor: Monomial) -> Monomial | None:
    """`monomial / divisor` when divisor's symbols all appear in it, else None."""
    rest = list(monomial)
    for name in divisor:
        if name not in rest:
            return None
        rest.remove(name)
    return tuple(rest)


def evaluate(size: Any, values: Mapping[str, int]) -> int:
    """The value of a size (a SymSize or an int) for the given symbol values."""
    if not isinstance(size, SymSize):
        return size
    return sum(c * math.prod(values[name] for name in m) for m, c in size.terms.items())


def size_hint(size: Any) -> int:
    """A size's value on the call being compiled, *without* a guard: only for choices that are
    correct whatever the size (a heuristic: which tensors to save, how to split work)."""
    return size.hint if isinstance(size, SymSize) else size


def size_code(size: Any) -> str:
    """A size as source text: `s0`, `16*s0`, or the number."""
    return size.code() if isinstance(size, SymSize) else str(size)


def is_symbolic(value: Any) -> bool:
    """Does `value` (a size, or a structure of them) contain a symbol?"""
    if isinstance(value, SymSize):
        return True
    if isinstance(value, (tuple, list)):
        return any(is_symbolic(v) for v in value)
    return False


def resolve(value: Any, values: Mapping[str, int]) -> Any:
    """`value` with every SymSize inside it replaced by its number for these symbol values."""
    if isinstance(value, SymSize):
        return evaluate(value, values)
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(resolve(v, values) for v in value)
    return value


def symbol_of(size: Any) -> tuple[str, int] | None:
    """(s, k) when `size` is k*s for one symbol s: a dim that tells s's value."""
    if isinstance(size, SymSize) and len(size.terms) == 1:
        ((monomial, coefficient),) = size.terms.items()
        if len(monomial) == 1:
            return monomial[0], coefficient
    return None


def bind_symbols(symbolic_shapes: list[tuple[Any, ...]], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """The symbols' values in a call, read from the inputs: a dim whose size is `s0` (or `k*s0`)
    gives s0. Every symbol must be found, and agree wherever it appears."""
    values: dict[str, int] = {}
    for symbolic, actual in zip(symbolic_shapes, shapes, strict=True):
        for size, value in zip(symbolic, actual, strict=True):
            if (found := symbol_of(size)) is not None and value % found[1] == 0:
                values.setdefault(found[0], value // found[1])
    for symbolic, actual in zip(symbolic_shapes, shapes, strict=True):
        if len(symbolic) != len(actual) or any(size.symbols() - values.keys() or evaluate(size, values) != value
                                               for size, value in zip(symbolic, actual, strict=True)
                                               if isinstance(size, SymSize)):
            raise ValueError(f"input shapes {shapes} do not fit the symbolic shapes "
                             f"{[tuple(map(size_code, s)) for s in symbolic_shapes]}")
    return values
