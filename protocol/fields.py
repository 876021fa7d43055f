"""Field checkers and the field tables (schemas) messages are validated against.

A checker takes (value, limits) and returns the normalised value or raises ``Bad``; the schema
that called it turns ``Bad`` into an InvalidFieldError naming the field's path. Paths are only
built on failure, and the fast paths test ``type(value) is ...``, because the manager runs this
on every measurement it receives and decoded msgpack only ever yields exact built-in types;
values built in Python (numpy scalars, tuples) take slower paths and come out as built-ins.
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol.errors import (
    InvalidFieldError,
    MissingFieldError,
    ProtocolError,
    UnknownFieldError,
)
from protocol.limits import MAX_WIRE_INT, Limits

Check = Callable[[Any, Limits], Any]

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SHOWN_CHARS = 60
_NAN = math.nan


class Bad(Exception):
    """A value failed a check. ``suffix`` locates it inside the field (``[3]``, ``.key``);
    ``detail`` replaces the default "must be ALLOWED, got VALUE" text."""

    def __init__(self, allowed: str, value: Any, suffix: str = "",
                 detail: str | None = None) -> None:
        super().__init__(allowed)
        self.allowed = allowed
        self.value = value
        self.suffix = suffix
        self.detail = detail

    def at(self, where: str) -> InvalidFieldError:
        where = f"{where}{self.suffix}"[:200]
        text = self.detail or (f"must be {self.allowed}, got {show(self.value)} "
                               f"({_kind(self.value)})")
        return InvalidFieldError(f"{where}: {text}", field=where, value=self.value)


def show(value: Any) -> str:
    """A short repr for reasons: a hostile 1 MB string must not become a 1 MB reason."""
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not turn validation into a crash
        text = f"<{type(value).__name__}>"
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 3] + "..."
    return text


def _kind(value: Any) -> str:
    return "nil" if value is None else type(value).__name__


def invalid(where: str, allowed: str, value: Any) -> InvalidFieldError:
    return Bad(allowed, value).at(where)


def relocate(error: ProtocolError, prefix: str) -> ProtocolError:
    """The same error with ``prefix`` put before its field path (for nested maps)."""
    moved = type(error)(f"{prefix}{error.message}",
                        field=f"{prefix}{error.field}" if error.field else prefix.rstrip("."),
                        value=error.value)
    return moved


def is_identifier(value: str) -> bool:
    return _IDENTIFIER.fullmatch(value) is not None


# -- scalar checkers ---------------------------------------------------------------------------


def whole(low: int = 0, high: int = MAX_WIRE_INT) -> Check:
    """An integer in [low, high]; bools and floats (even 3.0) are refused."""
    allowed = f"a whole number in [{low}, {high}]"

    def check(value: Any, limits: Limits) -> int:
        if type(value) is int and low <= value <= high:
            return value
        if type(value) is not int:
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise Bad(allowed, value)
            try:
                value = operator.index(value)
            except TypeError:
                raise Bad(allowed, value) from None
        if low <= value <= high:
            return value
        raise Bad(allowed, value)

    return check


def real(low: float = 0.0, high: float = math.inf, *, low_open: bool = False,
         high_open: bool = False) -> Check:
    """A finite number in the interval; ints (and numpy's numbers) become floats."""
    left = "(" if low_open else "["
    right = ")" if high_open or high == math.inf else "]"
    allowed = f"a finite number in {left}{low:g}, {high:g}{right}"
    # NaN compares unequal to everything, so an unused bound excludes nothing
    bad_low = low if low_open else _NAN
    bad_high = high if high_open or high == math.inf else _NAN

    def check(value: Any, limits: Limits) -> float:
        if type(value) is not float:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise Bad(allowed, value)
            try:
                value = float(value)
            except (OverflowError, TypeError, ValueError):
                raise Bad(allowed, value) from None
        if low <= value <= high and value != bad_low and value != bad_high:
            return value
        raise Bad(allowed, value)

    return check


def text(value: Any, limits: Limits) -> str:
    """A non-empty printable string without surrounding spaces, at most max_text_chars."""
    if (type(value) is str and 0 < len(value) <= limits.max_text_chars and value.isprintable()
            and value[0] != " " and value[-1] != " "):
        return value
    if isinstance(value, str) and type(value) is not str:
        return text(str(value), limits)
    raise Bad(f"a non-empty printable string of at most {limits.max_text_chars} characters "
              "without leading or trailing spaces", value)


def boolean(value: Any, limits: Limits) -> bool:
    if type(value) is bool:
        return value
    raise Bad("true or false", value)


def identifier(value: Any, limits: Limits) -> str:
    """A short lower-case identifier such as an error code or a quality flag."""
    if type(value) is str and _IDENTIFIER.fullmatch(value) is not None:
        return value
    raise Bad("an identifier matching [a-z][a-z0-9_]{0,63}", value)


def reason_text(value: Any, limits: Limits) -> str:
    if isinstance(value, str) and 0 < len(value) <= limits.max_reason_chars:
        return str(value)
    raise Bad(f"a non-empty string of at most {limits.max_reason_chars} characters", value)


def choice(options: tuple[str, ...]) -> Check:
    allowed = "one of " + ", ".join(options)

    def check(value: Any, limits: Limits) -> str:
        if type(value) is str and value in options:
            return value
        raise Bad(allowed, value)

    return check


# -- list checkers -----------------------------------------------------------------------------


def sequence(value: Any, max_items: int) -> list | tuple:
    """A list (or tuple) of at most ``max_items`` items."""
    if type(value) is not list and not isinstance(value, (list, tuple)):
        raise Bad(f"a list of at most {max_items} items", value)
    if len(value) > max_items:
        raise Bad("", len(value), detail=f"at most {max_items} items are allowed, "
                                         f"got {len(value)}")
    return value


def each(check: Check, items: list | tuple, limits: Limits) -> tuple:
    """Every item through ``check``; a failure names its index."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(check(item, limits))
        except Bad as bad:
            bad.suffix = f"[{i}]{bad.suffix}"
            raise
    return tuple(out)


def quality_flags(value: Any, limits: Limits) -> tuple[str, ...]:
    flags = each(identifier, sequence(value, limits.max_quality_flags), limits)
    if len(set(flags)) != len(flags):
        raise Bad("a list of distinct flags", value)
    return flags


def host_names(value: Any, limits: Limits) -> tuple[str, ...]:
    items = sequence(value, limits.max_query_hosts)
    if not items:
        raise Bad("a non-empty list of host names (omit it to mean all hosts)", value)
    names = each(text, items, limits)
    if len(set(names)) != len(names):
        raise Bad("a list of distinct host names", value)
    return names


_SEQ = whole()


def seq_ranges(value: Any, limits: Limits) -> tuple[tuple[int, int], ...]:
    """Inclusive [first, last] sequence ranges, ascending and not overlapping."""
    ranges = []
    previous_last = -1
    for i, item in enumerate(sequence(value, limits.max_ack_ranges)):
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise Bad("a [first, last] pair of sequence numbers", item, f"[{i}]")
        try:
            first, last = _SEQ(item[0], limits), _SEQ(item[1], limits)
        except Bad as bad:
            raise Bad(bad.allowed, bad.value, f"[{i}]") from None
        if last < first:
            raise Bad("a range with first <= last", item, f"[{i}]")
        if first <= previous_last:
            raise Bad(f"after the previous range (first > {previous_last})", item, f"[{i}]")
        ranges.append((first, last))
        previous_last = last
    return tuple(ranges)


# -- reply bodies: any plain data, bounded in size and depth -------------------------------------


def plain_data(value: Any, limits: Limits, depth: int = 0) -> Any:
    """A copy of ``value`` made only of nil, bool, int, finite float, str, list and str-keyed
    map, within the limits; tuples become lists and numeric scalars (numpy's) plain numbers."""
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is str:
        if len(value) > limits.max_reason_chars:
            raise Bad(f"a string of at most {limits.max_reason_chars} characters", value)
        return value
    if kind is int:
        if not -(2**63) <= value <= 2**64 - 1:
            raise Bad("an integer that fits in 64 bits", value)
        return value
    if kind is float:
        if value - value != 0.0:  # NaN and infinities
            raise Bad("a finite number", value)
        return value
    if isinstance(value, (list, tuple, Mapping)):
        if depth >= limits.max_depth:
            raise Bad("", None, detail=f"nested deeper than {limits.max_depth} levels")
        if len(value) > limits.max_container_items:
            raise Bad("", len(value), detail=f"at most {limits.max_container_items} items are "
                                             f"allowed, got {len(value)}")
        if isinstance(value, Mapping):
            return _plain_map(value, limits, depth)
        out = []
        for i, item in enumerate(value):
            try:
                out.append(plain_data(item, limits, depth + 1))
            except Bad as bad:
                bad.suffix = f"[{i}]{bad.suffix}"
                raise
        return out
    return _plain_scalar(value, limits, depth)


def _plain_map(value: Mapping, limits: Limits, depth: int) -> dict[str, Any]:
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise Bad("a map with string keys", key)
        try:
            out[str(key)] = plain_data(item, limits, depth + 1)
        except Bad as bad:
            bad.suffix = f".{key[:_SHOWN_CHARS]}{bad.suffix}"
            raise
    return out


def _plain_scalar(value: Any, limits: Limits, depth: int) -> Any:
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return plain_data(str(value), limits, depth)
    # numpy-like scalars (shape ()) know their plain Python value; arrays do not qualify
    if getattr(value, "shape", None) == () and callable(getattr(value, "item", None)):
        try:
            item = value.item()
        except Exception:  # a foreign scalar's item() may fail in any way
            item = None
        if type(item) in (bool, int, float):
            return plain_data(item, limits, depth)
    if hasattr(value, "__index__") and not isinstance(value, float):
        try:
            return plain_data(operator.index(value), limits, depth)
        except TypeError:
            pass
    if isinstance(value, numbers.Real):
        return plain_data(float(value), limits, depth)
    raise Bad("plain data (nil, bool, number, string, list or map)", value)


# -- schemas -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One wire field: its checker, and whether it must be present (optional ones may be
    absent or nil)."""

    check: Check
    required: bool = True


class Schema:
    """A map's fields by wire name; ``parse`` checks a decoded map against them."""

    def __init__(self, fields: Mapping[str, Field], *, also: frozenset[str] = frozenset()):
        self.fields = dict(fields)
        self._items = tuple((name, f.check, f.required) for name, f in self.fields.items())
        self._known = frozenset(self.fields) | also

    def parse(self, data: Any, limits: Limits) -> dict[str, Any]:
        """The normalised values by name; errors name the bare field (see ``relocate``)."""
        if type(data) is not dict:
            if not isinstance(data, Mapping):
                raise Bad("a map", data).at("message")
            data = dict(data)
        if not data.keys() <= self._known:
            extra = sorted(str(key) for key in data.keys() - self._known)[0][:_SHOWN_CHARS]
            raise UnknownFieldError(f"{extra}: unknown field; allowed: "
                                    f"{', '.join(self.fields)}", field=extra)
        values: dict[str, Any] = {}
        get = data.get
        for name, check, required in self._items:
            value = get(name)
            if value is None:
                if required:
                    if name in data:
                        raise Bad("present (it is required)", None).at(name)
                    raise MissingFieldError(f"{name}: required field is missing", field=name)
                values[name] = None
                continue
            try:
                values[name] = check(value, limits)
            except Bad as bad:
                raise bad.at(name) from None
        return values
