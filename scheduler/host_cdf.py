"""Each host's completion CDF at increasing times: the product over its core groups of F^mult.

Both routes evaluate a server only where its CDF can be strictly between 0 and 1 to double
precision, as a contiguous run of points per server, and give exactly what evaluating every
point gives:

- a fitted law per server (:class:`scheduler.model.Servers`): F = 1 - q sf(x - t) from t on,
  without a log and an exp per point; past the point where q sf < 1e-17, 1 - q sf is 1;
- a backlog mixture (:class:`scheduler.model.MixtureServers`) keeps the log route, the same
  arithmetic per point as ``completion.servers_log_cdf`` (its CDF can sit at a level such as
  0.5 or 0.9 between atoms, where a rounding difference moves a quantile across the flat).
  Before a server's earliest completion its log F is -inf; past the point where every atom's
  survival is below 1e-20, mult x log F is under 2^-54 in size and its exp rounds to 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scheduler import completion, fits
from scheduler.compact_servers import SplitServers
from scheduler.model import _FIELDS, MixtureServers, Servers

# a survival below this leaves 1 - q sf equal to 1 in double precision
_ROUNDS_TO_ONE = 1e-17
# a mixture's survival below this leaves exp(mult log F) equal to 1 for any mult up to 5,000
_LOG_ROUNDS_TO_ONE = 1e-20


def hosts_cdf(servers: Servers | MixtureServers, x: np.ndarray, hosts: int) -> np.ndarray:
    """(hosts, len(x)) CDF of each host's completion, ``x`` increasing, by either route."""
    if isinstance(servers, Servers):
        return servers_cdf(servers, x, hosts)
    return mixture_cdf(servers, x, hosts)


def many_hosts_cdf(problems: Sequence[tuple[Servers | MixtureServers, np.ndarray, int]],
                   wanted: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
    """:func:`hosts_cdf` of each (servers, x, hosts), each route's problems evaluated
    together (:func:`servers_cdfs`, :func:`mixtures_cdf`): the same values, to the bit.

    ``wanted``: per problem None (every point) or a (hosts, len(x)) boolean mask of the
    points to work out; each of those is what evaluating every point gives, the others are
    left at 0 or 1 (meaningless there)."""
    masks = [None] * len(problems) if wanted is None else list(wanted)
    fitted: list[tuple[int, tuple[Servers, np.ndarray, int]]] = []
    mixed: list[tuple[int, tuple[MixtureServers, np.ndarray, int]]] = []
    for k, (servers, x, hosts) in enumerate(problems):
        if isinstance(servers, Servers):
            fitted.append((k, (servers, x, hosts)))
        else:
            mixed.append((k, (servers, x, hosts)))
    out: list[np.ndarray] = [np.empty(0)] * len(problems)
    for k, cdf in zip([k for k, _ in fitted], servers_cdfs([p for _, p in fitted],
                                                           [masks[k] for k, _ in fitted])):
        out[k] = cdf
    for k, cdf in zip([k for k, _ in mixed], mixtures_cdf([p for _, p in mixed],
                                                          [masks[k] for k, _ in mixed])):
        out[k] = cdf
    return out


def servers_cdf(servers: Servers, x: np.ndarray, hosts: int) -> np.ndarray:
    """(hosts, len(x)) CDF of each host's completion, ``x`` increasing: the product over its
    core groups of F^mult, F = 1 - q sf(x - t) from t on. The values of exp(summed
    Servers.log_cdf) to rounding, without a log and an exp per point."""
    return servers_cdfs([(servers, x, hosts)])[0]


def servers_cdfs(problems: Sequence[tuple[Servers, np.ndarray, int]],
                 wanted: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
    """:func:`servers_cdf` of each (servers, x, hosts), every problem's points evaluated in
    one pass (each point's arithmetic is its own): the same values, to the bit.
    ``wanted``: as :func:`many_hosts_cdf`'s."""
    out = []
    for (servers, _, hosts), cdf in zip(problems, _component_cdfs(problems, wanted)):
        mult = servers.mult[0]
        # no share (mult 0): finished from the start
        cdf[mult == 0] = 1.0
        groups = cdf.shape[0] // hosts
        out.append(cdf if groups == 1 else cdf.reshape(hosts, groups, -1).prod(axis=1))
    return out


def mixture_cdf(servers: MixtureServers, x: np.ndarray, hosts: int) -> np.ndarray:
    """(hosts, len(x)) CDF of each host's completion, ``x`` increasing, for backlog mixtures:
    exp of the sum over core groups of mult x the mixture's log F (``MixtureServers.log_cdf``),
    evaluated only on each server's run of points between its earliest completion and the
    point where every atom's survival is below 1e-20."""
    return mixtures_cdf([(servers, x, hosts)])[0]


def mixtures_cdf(problems: Sequence[tuple[MixtureServers, np.ndarray, int]],
                 wanted: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
    """:func:`mixture_cdf` of each (servers, x, hosts), to the bit: the runs of points of
    every problem whose mixtures have as many atoms are evaluated in one
    ``MixtureServers.log_cdf`` (each point's arithmetic is its own, whatever else is
    evaluated beside it), so many small predictions cost one evaluation's calls.
    ``wanted``: as :func:`many_hosts_cdf`'s."""
    log_cdfs: list[np.ndarray] = []
    pending: dict[int, list[tuple[int, MixtureServers, np.ndarray, np.ndarray, np.ndarray]]] = {}
    masks = [None] * len(problems) if wanted is None else wanted
    for (servers, x, hosts), mask in zip(problems, masks):
        mult = servers.mult[0]
        used = mult > 0
        first = np.where(used, np.searchsorted(x, servers.t[0]), 0)
        tail = servers.upper_bound(_LOG_ROUNDS_TO_ONE)[0]
        stop = np.where(used, np.maximum(np.searchsorted(x, tail, side="right"), first), 0)
        log_cdf = np.where(np.arange(x.size)[None, :] < first[:, None], -np.inf, 0.0)
        rows, flat, counts = _points(first, stop, x.size, mask, hosts)
        log_cdfs.append(log_cdf)
        if rows.size:
            pending.setdefault(servers.weight.shape[-1], []).append(
                (len(log_cdfs) - 1, servers, counts, flat, x[flat - rows * x.size]))
    for items in pending.values():
        # each server's atoms repeated over its run of points (block copies, not a gather)
        counts = np.concatenate([counts for _, _, counts, _, _ in items])

        def repeated(get: Any, counts: np.ndarray = counts, items: list = items) -> np.ndarray:
            return np.repeat(np.concatenate([get(servers) for _, servers, _, _, _ in items]),
                             counts, axis=0)

        # log F reads no part's mult
        parts = Servers(**{name: repeated(lambda s, name=name: getattr(s.parts, name)[0])
                           for name in _FIELDS if name != "mult"}, mult=np.zeros(1))
        mult = repeated(lambda s: s.mult[0])
        run = MixtureServers(parts, repeated(lambda s: s.weight[0]), mult)
        values = mult * run.log_cdf(np.concatenate([points for *_, points in items]))
        start = 0
        for k, _, _, flat, _ in items:
            log_cdfs[k].ravel()[flat] = values[start:start + flat.size]
            start += flat.size
    return [np.exp(log_cdf.reshape(hosts, log_cdf.shape[0] // hosts, -1).sum(axis=1))
            for log_cdf, (_, _, hosts) in zip(log_cdfs, problems)]


def _runs(first: np.ndarray, stop: np.ndarray, size: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, flat index into a (rows, size) array) of every point of each row's run
    first .. stop - 1, and each row's run length."""
    counts = stop - first
    rows = np.repeat(np.arange(first.size), counts)
    flat = np.arange(rows.size) + np.repeat(first + size * np.arange(first.size)
                                            - np.cumsum(counts) + counts, counts)
    return rows, flat, counts


def _points(first: np.ndarray, stop: np.ndarray, size: int, wanted: np.ndarray | None,
            hosts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_runs`, or with ``wanted`` (hosts, size) only its points of each run (every
    core group of a host, one row each, host-major, reads its host's row of the mask)."""
    if wanted is None:
        return _runs(first, stop, size)
    index = np.arange(size)[None, :]
    live = (index >= first[:, None]) & (index < stop[:, None]) & np.repeat(
        wanted, first.size // hosts, axis=0)
    flat = np.flatnonzero(live)
    return flat // size, flat, live.sum(axis=1)


def _component_cdfs(problems: Sequence[tuple[Servers, np.ndarray, int]],
                    wanted: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
    """Per (servers, x, _): (servers, len(x)) F^mult, F = 1 - q sf(x - t) of each server
    type, evaluated only where F is neither 0 (before t) nor 1 to double precision (past the
    point where q sf < 1e-17, 1 - q sf rounds to 1 exactly): a contiguous run of points per
    server, every problem's runs in one pass. A host's share finishes when all of its
    processes do: the power is taken on the run alone (0 and 1 are their own powers)."""
    if not problems:
        return []
    cdfs, runs = [], []
    masks = [None] * len(problems) if wanted is None else wanted
    for (servers, x, hosts), mask in zip(problems, masks):
        t = servers.t[0]
        first = np.searchsorted(x, t)
        stop = np.maximum(np.searchsorted(x, servers.upper_bound(_ROUNDS_TO_ONE)[0]), first)
        cdfs.append((np.arange(x.size)[None, :] >= stop[:, None]).astype(float))
        rows, flat, counts = _points(first, stop, x.size, mask, hosts)
        runs.append((flat, counts, x[flat - rows * x.size] - np.repeat(t, counts)))

    def joined(arrays: list[np.ndarray]) -> np.ndarray:
        # one problem (a query) is not copied again
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

    def each(name: str) -> np.ndarray:
        return joined([np.repeat(getattr(servers, name)[0], counts)
                       for (servers, _, _), (_, counts, _) in zip(problems, runs)])

    codes = np.concatenate([servers.code[0] for servers, _, _ in problems])
    with np.errstate(divide="ignore", invalid="ignore"):
        y = joined([y for _, _, y in runs])
        if codes.size and (codes == codes[0]).all():
            # one family (the usual case): told by the servers, not by every point
            survival = fits.FAMILIES[int(codes[0])].sf(each("p1"), each("p2"), y)
        else:
            survival = fits.sf(each("code"), each("p1"), each("p2"), y)
    values = 1.0 - each("q") * survival
    powers = joined([servers.mult[0][counts > 0]
                     for (servers, _, _), (_, counts, _) in zip(problems, runs)])
    if ((powers != 0.0) & (powers != 1.0)).any():
        mult = each("mult")
        for count in np.unique(powers):
            if count not in (0.0, 1.0):
                chosen = mult == count
                values[chosen] = _power(values[chosen], float(count))
    start = 0
    for cdf, (flat, _, _) in zip(cdfs, runs):
        cdf.ravel()[flat] = values[start:start + flat.size]
        start += flat.size
    return cdfs


def _power(values: np.ndarray, count: float) -> np.ndarray:
    """values ** count, by repeated squaring for a whole count (a general power costs a log
    and an exp per value)."""
    if not (count.is_integer() and 1 <= count <= 64):
        return values ** count
    out, base, left = np.ones_like(values), values, int(count)
    while left:
        if left & 1:
            out = out * base
        left >>= 1
        if left:
            base = base * base
    return out


def rows_cdf(servers: Any, x: np.ndarray) -> np.ndarray:
    """(P, W) product over each row's groups of F_g(x)^mult_g at the row's times ``x``, with
    the served law's arithmetic (:mod:`scheduler.host_cdf`): a plain server's F is
    1 - q sf(x - t) from t on, a whole power by repeated squaring; a backlog mixture goes
    through its log CDF (its servers of one atom too, when split out of it by
    ``scheduler.compact_servers``). A level map can be steep where F rounds near 1, so other
    arithmetic (the exp of a summed log F) moved the criterion by up to 0.8% from the
    served law's; this gives its figures, in about 10% less time."""
    mult = servers.mult[:, :, None]
    if isinstance(servers, (MixtureServers, SplitServers)):
        per_server = completion.servers_log_cdf(servers, x).transpose(0, 2, 1)
        return np.exp(np.where(mult > 0, mult * per_server, 0.0).sum(axis=1))
    y = x[:, None, :] - servers.t[:, :, None]  # (P, groups, W)
    before = y < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        value = fits.sf(servers.code[:, :, None], servers.p1[:, :, None],
                        servers.p2[:, :, None], np.maximum(y, 0.0, out=y))
    # 1 - q sf, 0 before the server's start (in place: the window is the screen's largest)
    value *= servers.q[:, :, None]
    np.subtract(1.0, value, out=value)
    value[before] = 0.0
    for count in np.unique(servers.mult):
        if count not in (0.0, 1.0):
            chosen = servers.mult == count
            value[chosen] = _power(value[chosen], float(count))
    value[servers.mult == 0] = 1.0
    return value[:, 0] if value.shape[1] == 1 else value.prod(axis=1)
