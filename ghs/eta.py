"""The ETA of a running task: plans and progress as users give them, and the answer.

A plan is what ``ghs schedule --json`` or ``ghs predict --json`` wrote (hosts with their
shares), a scheduler Plan or Prediction, an Answer, or a map host -> share. Progress is the
fraction of each host's share done. The law of the remaining time comes from the manager
(``ghs.Client.eta``: each host's current state and estimates) or, from a host file, from
``local_eta`` (each host in its steady state). ``Eta.line()`` says it in words:
"about 2.1 h, 90% by 3.0 h".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ghs.errors import GhsError
from ghs.hostfile import finite_number
from scheduler import Backlog, Plan, Prediction
from scheduler.eta import remaining


class EtaError(GhsError):
    """A plan or progress that cannot be read, or that do not match."""

    code = "invalid_argument"


@dataclass(frozen=True)
class Eta:
    """The law of the remaining time (``remaining``: a Prediction whose times are seconds
    from now and whose shares are the reference-CPU-seconds left), the progress it rests on,
    the seconds since the launch if known, and where it was computed."""

    remaining: Prediction
    fraction_done: dict[str, float]
    elapsed_seconds: float | None
    source: str

    @property
    def mean_seconds(self) -> float:
        return self.remaining.mean

    def quantile_seconds(self, name: str = "p90") -> float:
        return self.remaining.quantiles[name]

    def line(self) -> str:
        """"about 2.1 h, 90% by 3.0 h": the mean and the p90 of the remaining time."""
        return (f"about {human(self.remaining.mean)}, 90% by "
                f"{human(self.remaining.quantiles['p90'])}")

    def to_dict(self) -> dict[str, Any]:
        payload = self.remaining.to_dict()
        payload.update(fraction_done=dict(self.fraction_done),
                       elapsed_seconds=self.elapsed_seconds, source=self.source,
                       eta=self.line())
        if self.elapsed_seconds is not None:
            payload["total_seconds"] = {
                "mean": self.elapsed_seconds + self.remaining.mean,
                **{name: self.elapsed_seconds + value
                   for name, value in self.remaining.quantiles.items()}}
        return payload


def human(seconds: float) -> str:
    """A duration as a person says it: ``40 s``, ``12 min``, ``2.1 h``, ``3.5 d``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def plan_shares(plan: Any) -> tuple[list[str], list[float]]:
    """(host names, shares in reference-CPU-seconds) of any form of plan (see the module)."""
    result = getattr(plan, "result", None)
    if result is not None:  # an Answer
        plan = result
    if isinstance(plan, Plan):
        plan = plan.prediction
    if isinstance(plan, Prediction):
        return list(plan.hosts), [float(s) for s in plan.shares]
    if not isinstance(plan, Mapping):
        raise EtaError(f"a plan must be a Plan, a Prediction or the JSON of ghs schedule/"
                       f"predict, got {type(plan).__name__}", field="plan", value=None)
    rows = plan.get("hosts")
    if rows is None:
        pairs = list(plan.items())
    elif isinstance(rows, list) and all(isinstance(r, Mapping) for r in rows):
        try:
            pairs = [(r["name"], r["share"]) for r in rows]
        except KeyError as missing:
            raise EtaError(f"each host of the plan needs a {missing.args[0]!r}",
                           field="plan", value=None) from None
    else:
        raise EtaError("the plan's 'hosts' must be a list of {name, share} maps",
                       field="plan", value=None)
    names = [str(name) for name, _ in pairs]
    if not names or len(set(names)) != len(names):
        raise EtaError("the plan must name each host once", field="plan", value=names)
    shares = []
    for name, share in pairs:
        if not finite_number(share) or share < 0:
            shown = repr(share) if len(repr(share)) <= 40 else f"{repr(share)[:40]}..."
            raise EtaError(f"the share of host {name!r} must be a number >= 0 reference-CPU-"
                           f"seconds, got {shown}", field="plan", value=None)
        shares.append(float(share))
    if sum(shares) <= 0:
        raise EtaError("the plan gives no work to any host", field="plan", value=shares)
    return names, shares


def load_plan(path: str | Path) -> dict[str, Any]:
    """The JSON plan in ``path`` (what ``ghs schedule --json`` or ``ghs predict --json`` wrote)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise EtaError(f"cannot read plan {str(path)!r}: {exc.strerror or exc}", field="plan",
                       value=str(path)) from None
    except ValueError as exc:
        raise EtaError(f"plan {str(path)!r} is not JSON: {exc}", field="plan",
                       value=str(path)) from None
    except RecursionError:  # thousands of nested brackets: no plan nests so
        raise EtaError(f"plan {str(path)!r} nests too deeply to be a plan", field="plan",
                       value=str(path)) from None
    if not isinstance(data, dict):
        raise EtaError(f"plan {str(path)!r} must hold a JSON object", field="plan",
                       value=str(path))
    plan_shares(data)
    return data


def check_progress(names: Sequence[str], progress: Mapping[str, Any]) -> dict[str, float]:
    """Fraction done per plan host (0 for hosts not given); each in [0, 1]."""
    if not isinstance(progress, Mapping):
        raise EtaError("progress must be a map host -> fraction done", field="progress",
                       value=None)
    fractions = {name: 0.0 for name in names}
    for name, value in progress.items():
        if name not in fractions:
            raise EtaError(f"progress names host {name!r}, which is not in the plan "
                           f"({', '.join(names)})", field="progress", value=name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0.0 <= value <= 1.0:
            raise EtaError(f"fraction done of host {name!r} must be in [0, 1], got {value!r}",
                           field="progress", value=value)
        fractions[name] = float(value)
    return fractions


def parse_progress(items: Sequence[str]) -> dict[str, float]:
    """``HOST=FRACTION`` items (a fraction such as 0.4, or a percentage such as 40%)."""
    result: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or not text:
            raise EtaError(f"progress {item!r}: expected HOST=FRACTION, e.g. ws1=0.4 or "
                           "ws1=40%", field="progress", value=item)
        percent = text.endswith("%")
        try:
            value = float(text[:-1] if percent else text) / (100.0 if percent else 1.0)
        except ValueError:
            raise EtaError(f"progress {item!r}: {text!r} is not a number", field="progress",
                           value=item) from None
        if not 0.0 <= value <= 1.0:
            raise EtaError(f"progress {item!r}: the fraction done must be in [0, 1] "
                           "(0%..100%)", field="progress", value=item)
        if name in result:
            raise EtaError(f"progress names host {name!r} twice", field="progress", value=name)
        result[name] = value
    return result


def local_eta(hosts: Sequence[Any], plan: Any, progress: Mapping[str, Any], *,
              elapsed_seconds: float | None = None, dist: str = "lognormal") -> Eta:
    """The ETA from host parameters alone (a host file): each host in its steady state.

    ``hosts``: scheduler Hosts including every host of the plan.
    """
    names, shares = plan_shares(plan)
    fractions = check_progress(names, progress)
    by_name = {h.name: h for h in hosts}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise EtaError(f"plan host {missing[0]!r} is not in the host file", field="plan",
                       value=missing[0])
    chosen = [by_name[name] for name in names]
    law = remaining(chosen, shares, fraction_done=fractions,
                    backlog=[Backlog.steady_state() for _ in chosen], dist=dist)
    return Eta(law, fractions, elapsed_seconds, "host file")
