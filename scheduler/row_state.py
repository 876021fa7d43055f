"""Per-host state kept as rows of numpy arrays: validation, growth and (de)serialisation.

The forecast bank and the calibrator are both "one row per host, plus a few shared arrays";
this base holds what they share, so a manager can persist either as a dict of arrays.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from scheduler.errors import InvalidArgumentError


def check_hosts(hosts: object) -> int:
    """A row count: a whole number >= 0."""
    if isinstance(hosts, bool) or not isinstance(hosts, (int, np.integer)) or hosts < 0:
        raise InvalidArgumentError(f"hosts must be a whole number >= 0, got {hosts!r}",
                                   field="hosts", value=hosts)
    return int(hosts)


class RowState:
    """Base: ``FIELDS`` name every state array, ``ROW_FIELDS`` those with one row per host;
    ``settings`` is a frozen dataclass of type ``SETTINGS``."""

    FIELDS: ClassVar[tuple[str, ...]] = ()
    ROW_FIELDS: ClassVar[tuple[str, ...]] = ()
    SETTINGS: ClassVar[type] = object
    settings: Any

    def __init__(self, hosts: int, settings: Any = None) -> None:
        raise NotImplementedError

    @property
    def hosts(self) -> int:
        return int(getattr(self, self.ROW_FIELDS[0]).shape[0])

    def to_state(self) -> dict[str, Any]:
        """Every array by name plus ``settings`` (a dict): what :meth:`from_state` takes."""
        state: dict[str, Any] = {name: getattr(self, name).copy() for name in self.FIELDS}
        state["settings"] = dataclasses.asdict(self.settings)
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Any:
        """Rebuild from :meth:`to_state`'s dict (arrays or nested lists)."""
        try:
            settings = cls.SETTINGS(**state["settings"])
            made = cls(len(state[cls.ROW_FIELDS[0]]), settings)
            for name in cls.FIELDS:
                blank = getattr(made, name)
                value = np.asarray(state[name], dtype=blank.dtype)
                if value.shape != blank.shape:
                    raise ValueError(f"{name} has shape {value.shape}, not {blank.shape}")
                setattr(made, name, value.copy())
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"not a {cls.__name__} state: {exc}", field="state",
                                       value=None) from None
        return made

    def grow(self, hosts: int) -> None:
        """Add empty rows (new hosts) so there are ``hosts`` rows."""
        if check_hosts(hosts) <= self.hosts:
            return
        extra = type(self)(hosts - self.hosts, self.settings)
        for name in self.ROW_FIELDS:
            setattr(self, name, np.concatenate([getattr(self, name), getattr(extra, name)]))

    def rows(self, host_indices: Any) -> np.ndarray:
        """Host indices as an int64 array, each in [0, hosts)."""
        if type(host_indices) is int and 0 <= host_indices < self.hosts:
            # one host (a refresh asks host by host, thousands of times an hour)
            return np.array([host_indices], dtype=np.int64)
        idx = np.atleast_1d(np.asarray(host_indices))
        if idx.size == 0:
            return idx.astype(np.int64).reshape(0)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or (idx < 0).any() or (
                idx >= self.hosts).any():
            raise InvalidArgumentError(f"host indices must be whole numbers in [0, "
                                       f"{self.hosts}), got {host_indices!r}",
                                       field="host_indices", value=None)
        return idx.astype(np.int64)
