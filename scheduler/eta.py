"""The remaining time of a running divisible task: ``remaining``, from each share's progress.

A task split as ``shares`` (reference-CPU-seconds per host) has done part of each share. From
now, host k still needs share_k (1 - fraction_k) and starts from its current state (a Backlog
built from its latest running-jobs snapshot, or the steady state when there is none), so the
remaining time until the slowest share finishes has exactly the law ``predict`` gives for those
remaining shares launched now: no second completion law is written here. A host whose share is
done gets no remaining work and contributes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from scheduler.backlog import Backlog
from scheduler.errors import InvalidArgumentError
from scheduler.hosts import Host
from scheduler.model import DEFAULT_DIST
from scheduler.prediction import Prediction, check_hosts, predict


def remaining_shares(hosts: Sequence[Host], shares: Sequence[float] | Mapping[str, float], *,
                     fraction_done: Mapping[str, float] | None = None,
                     work_done: Mapping[str, float] | None = None) -> np.ndarray:
    """Reference-CPU-seconds each host still has to do, aligned with ``hosts``.

    ``shares``: each host's whole share (a sequence aligned with ``hosts`` or a map by name).
    Progress is given per host as ``fraction_done`` (in [0, 1]) or ``work_done``
    (reference-CPU-seconds in [0, share]); a host named in neither has done nothing yet.
    """
    hosts = check_hosts(hosts)
    names = [h.name for h in hosts]
    share = _shares(names, shares)
    if fraction_done is not None and work_done is not None:
        raise InvalidArgumentError("give fraction_done or work_done, not both",
                                   field="work_done", value=work_done)
    given = fraction_done if fraction_done is not None else work_done
    done = np.zeros(len(names))
    if given is not None:
        if not isinstance(given, Mapping):
            raise InvalidArgumentError("progress must be a map from host name to a number",
                                       field="progress", value=given)
        index = {name: k for k, name in enumerate(names)}
        for name, value in given.items():
            if name not in index:
                raise InvalidArgumentError(f"progress names host {name!r}, which is not in "
                                           f"the plan ({', '.join(names)})", field="progress",
                                           value=name)
            k = index[name]
            number = _number("progress", value, name)
            if fraction_done is not None:
                if not 0.0 <= number <= 1.0:
                    raise InvalidArgumentError(f"fraction done of host {name!r} must be in "
                                               f"[0, 1], got {value!r}", field="fraction_done",
                                               value=value)
                done[k] = number * share[k]
            else:
                if not 0.0 <= number <= share[k] * (1 + 1e-9):
                    raise InvalidArgumentError(
                        f"work done on host {name!r} must be in [0, its share {share[k]:g}] "
                        f"reference-CPU-seconds, got {value!r}", field="work_done", value=value)
                done[k] = min(number, share[k])
    return np.maximum(share - done, 0.0)


def remaining(hosts: Sequence[Host], shares: Sequence[float] | Mapping[str, float], *,
              fraction_done: Mapping[str, float] | None = None,
              work_done: Mapping[str, float] | None = None,
              backlog: Sequence[Backlog] | Mapping[str, Backlog] | None = None,
              dist: str = DEFAULT_DIST) -> Prediction:
    """The law of the time (seconds from now) until every share of a running task is done.

    ``hosts``: the plan's hosts with their current parameters; ``shares`` and the progress as
    in :func:`remaining_shares`; ``backlog``: each host's state now (see ``predict``; None
    starts every host in its steady state, what is known of a host without a snapshot).
    The Prediction's ``work`` and ``shares`` are the remaining reference-CPU-seconds.
    Raises InvalidArgumentError when every share is already done.
    """
    hosts = check_hosts(hosts)
    left = remaining_shares(hosts, shares, fraction_done=fraction_done, work_done=work_done)
    total = float(left.sum())
    if total <= 0:
        raise InvalidArgumentError("every share is done: no remaining time to predict",
                                   field="progress", value=None)
    if backlog is None:
        backlog = [Backlog.steady_state() for _ in hosts]
    return predict(hosts, total, dist, shares=left.tolist(), backlog=backlog)


def _shares(names: list[str], shares: Sequence[float] | Mapping[str, float]) -> np.ndarray:
    if isinstance(shares, Mapping):
        unknown = sorted(set(shares) - set(names))
        if unknown:
            raise InvalidArgumentError(f"shares name host {unknown[0]!r}, which is not among "
                                       "the hosts", field="shares", value=unknown[0])
        missing = [name for name in names if name not in shares]
        if missing:
            raise InvalidArgumentError(f"no share given for host {missing[0]!r}",
                                       field="shares", value=missing[0])
        values = [shares[name] for name in names]
    else:
        values = list(shares)
    if len(values) != len(names):
        raise InvalidArgumentError(f"expected {len(names)} shares (one per host), got "
                                   f"{len(values)}", field="shares", value=len(values))
    array = np.array([_number("shares", v, name) for v, name in zip(values, names)])
    if (array < 0).any() or array.sum() <= 0:
        raise InvalidArgumentError("shares must be >= 0 reference-CPU-seconds and not all zero",
                                   field="shares", value=array.tolist())
    return array


def _number(field: str, value: object, name: str) -> float:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{field} of host {name!r} must be a number, got {value!r}",
                                   field=field, value=value)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{field} of host {name!r} must be a number, got {value!r}",
                                   field=field, value=value) from None
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{field} of host {name!r} must be finite, got {value!r}",
                                   field=field, value=value)
    return number
