"""Host files: the offline source of host parameters (SPEC section 7).

``{"hosts": [{"name": "ws1", "lam": 0.0017, "mu": 0.0083, "sigma": 240.0, "rho": 0.2,
"tau": 1.0, "cores": 1}, ...]}``. A host whose rho is 1 or more is saturated by its owners'
work: it is kept out of the usable hosts and reported with the reason. Numbers must be JSON
numbers (a quoted "0.2" is refused). A missing tau or cores takes its default and a
warning says so; so does a rho far above what lam, mu and cores imply.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ghs.errors import HostFileError
from scheduler import Host, SchedulerError
from scheduler.selection import Exclusion

REQUIRED = ("name", "lam", "mu", "sigma", "rho")
OPTIONAL = {"tau": 1.0, "cores": 1}  # the defaults of a field left out
NUMBERS = ("lam", "mu", "sigma", "rho", "tau", "cores")
# a measured rho above lam / (cores mu) by this factor (and by RHO_SLACK) is not the M/G/1
# utilisation of those parameters: likely a unit slip (mean demand given for mu) or a typo
RHO_EXCESS_FACTOR = 1.5
RHO_SLACK = 0.05


@dataclass(frozen=True)
class HostList:
    """Usable hosts and the ones excluded (with the reason), in file order."""

    hosts: tuple[Host, ...]
    excluded: tuple[Exclusion, ...]
    warnings: tuple[str, ...] = ()

    def select(self, names: Sequence[str]) -> HostList:
        """Only the named hosts; an unknown or excluded name is an error."""
        if not names:
            return self
        by_name = {host.name: host for host in self.hosts}
        reasons = {e.name: e.reason for e in self.excluded}
        chosen = []
        for name in names:
            if name in reasons:
                raise HostFileError(f"host {name!r} is unusable: {reasons[name]}",
                                    field="host", value=name)
            if name not in by_name:
                known = ", ".join(sorted(by_name)[:8]) + (", ..." if len(by_name) > 8 else "")
                raise HostFileError(f"unknown host {name!r} (known: {known})", field="host",
                                    value=name)
            chosen.append(by_name[name])
        return HostList(tuple(dict.fromkeys(chosen)), ())

    def require_usable(self) -> None:
        if not self.hosts:
            reasons = "; ".join(f"{e.name}: {e.reason}" for e in self.excluded[:3])
            raise HostFileError(f"no usable hosts ({reasons})" if reasons else "no hosts given",
                                field="hosts", value=None)


def load_hosts(path: str | Path) -> HostList:
    """Read and validate a host file; errors name the file, the entry and the field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HostFileError(f"host file {str(path)!r} does not exist", field="hosts_file",
                            value=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HostFileError(f"cannot read host file {str(path)!r}: {exc}",
                            field="hosts_file", value=str(path)) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HostFileError(f"host file {str(path)!r} is not valid JSON: {exc.msg} at line "
                            f"{exc.lineno} column {exc.colno}", field="hosts_file",
                            value=str(path)) from None
    except RecursionError:  # thousands of nested brackets: no host file nests so
        raise HostFileError(f"host file {str(path)!r} nests too deeply to be a host file",
                            field="hosts_file", value=str(path)) from None
    return parse_hosts(document, source=str(path))


def parse_hosts(document: Any, source: str = "host list") -> HostList:
    """Hosts from the decoded JSON document of a host file."""
    if not isinstance(document, dict) or not isinstance(document.get("hosts"), list):
        raise HostFileError(f'{source}: expected an object with a "hosts" list',
                            field="hosts", value=None)
    hosts: list[Host] = []
    excluded: list[Exclusion] = []
    seen: set[str] = set()
    warnings: list[str] = []
    defaulted: dict[str, list[str]] = {}
    for index, entry in enumerate(document["hosts"]):
        where = f"{source}: hosts[{index}]"
        if not isinstance(entry, dict):
            raise HostFileError(f"{where}: expected an object, got {type(entry).__name__}",
                                field="hosts", value=index)
        missing = [key for key in REQUIRED if key not in entry]
        if missing:
            raise HostFileError(f"{where}: missing field {missing[0]!r}", field=missing[0],
                                value=None)
        unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
        quoted = [key for key in NUMBERS if isinstance(entry.get(key), str)]
        if quoted:
            raise HostFileError(f"{where}: {quoted[0]} must be a JSON number, got the string "
                                f"{entry[quoted[0]]!r} (write it without quotes)",
                                field=quoted[0], value=entry[quoted[0]])
        if unknown:
            raise HostFileError(f"{where}: unknown field {unknown[0]!r} (allowed: "
                                f"{', '.join((*REQUIRED, *OPTIONAL))})", field=unknown[0],
                                value=entry[unknown[0]])
        name = entry["name"]
        if isinstance(name, str) and name in seen:
            raise HostFileError(f"{where}: host name {name!r} appears twice", field="name",
                                value=name)
        rho = entry["rho"]
        if finite_number(rho) and rho >= 1 and isinstance(name, str) and name.strip():
            excluded.append(Exclusion(name, f"rho {rho:g} >= 1: saturated by local jobs"))
            seen.add(name)
            continue
        try:
            host = Host(name=name, lam=_number(entry["lam"]), mu=_number(entry["mu"]),
                        sigma=_number(entry["sigma"]), rho=_number(rho),
                        tau=_number(entry.get("tau", OPTIONAL["tau"])),
                        cores=entry.get("cores", OPTIONAL["cores"]))
        except SchedulerError as exc:
            raise HostFileError(f"{where}: {exc.message}", field=exc.field,
                                value=exc.value) from None
        seen.add(host.name)
        hosts.append(host)
        for key in OPTIONAL:
            if key not in entry:
                defaulted.setdefault(key, []).append(host.name)
        implied = host.lam / (host.cores * host.mu)
        if host.rho > RHO_EXCESS_FACTOR * implied + RHO_SLACK:
            warnings.append(f"{source}: host {host.name!r}: rho {host.rho:g} is far above "
                            f"lam / (cores mu) = {implied:.3g}; check lam, mu and cores")
    for key, names in defaulted.items():
        listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5
                                         else "")
        warnings.insert(0, f"{source}: no {key} given for {listed}: assuming {key} "
                           f"{OPTIONAL[key]:g}")
    return HostList(tuple(hosts), tuple(excluded), tuple(warnings))


def finite_number(value: Any) -> bool:
    """Whether a decoded JSON value is a finite number (not a bool, not an integer past any
    float: JSON has no limit on digits)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _number(value: Any) -> Any:
    # JSON booleans are ints in Python; refuse them so `"rho": true` is not read as 1
    if isinstance(value, bool):
        return str(value).lower()
    return value
