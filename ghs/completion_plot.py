"""The completion-time CDF of a task beside each host's own law, as a PNG a person reads.

matplotlib is the optional extra ``plot``; without it the caller gets a one-line GhsError.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ghs.errors import GhsError
from ghs.figure_file import save_figure
from scheduler import Prediction

POINTS = 400
MAX_HOST_LINES = 12  # beyond this the per-host lines are a grey band with one legend entry


def require_matplotlib() -> None:
    """Raise a one-line GhsError when the ``plot`` extra is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise GhsError("plotting needs matplotlib: pip install 'ghs[plot]'",
                       field="plot", value=None) from None


def plot_completion(prediction: Prediction, path: str | Path, *,
                    by_seconds: float | None = None) -> Path:
    """Draw P(T <= t) of the task and of every host to ``path`` (PNG); p50 and p90 marked.

    ``by_seconds`` also marks the probability of finishing by that time. Times in hours.
    """
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    # to p95 and a half: the tail beyond flattens everything before it
    upper = prediction.quantiles["p95"] * 1.5
    if by_seconds is not None:
        upper = max(upper, by_seconds * 1.05)
    seconds = np.linspace(0.0, upper, POINTS)
    hours = seconds / 3600.0
    figure, axes = plt.subplots(figsize=(8, 5), layout="constrained")
    per_host = prediction.host_cdf(seconds)
    many = len(prediction.hosts) > MAX_HOST_LINES
    for index, name in enumerate(prediction.hosts):
        label = None if many and index else (f"each of {len(prediction.hosts)} hosts" if many
                                             else name)
        axes.plot(hours, per_host[index], linewidth=0.8, alpha=0.35 if many else 0.7,
                  color="grey" if many else None, label=label)
    axes.plot(hours, prediction.cdf(seconds), color="black", linewidth=2.2,
              label="task (all hosts done)")
    for level, style in (("p50", "--"), ("p90", ":")):
        at = prediction.quantiles[level] / 3600.0
        axes.axvline(at, color="tab:red", linestyle=style, linewidth=1.2,
                     label=f"{level} = {at:.2f} h")
    if by_seconds is not None:
        chance = float(prediction.cdf(by_seconds))
        axes.plot([by_seconds / 3600.0], [chance], "o", color="tab:blue",
                  label=f"P(done by {by_seconds / 3600:.2f} h) = {chance:.3f}")
    axes.set_xlim(0.0, hours[-1])
    axes.set_ylim(0.0, 1.01)
    axes.set_xlabel("time since launch (hours)")
    axes.set_ylabel("probability finished")
    host_word = "host" if len(prediction.hosts) == 1 else "hosts"
    axes.set_title(f"{prediction.work / 3600:.2f} h of work on {len(prediction.hosts)} "
                   f"{host_word} ({prediction.distribution} fit)")
    # the legend goes beside the axes so it never hides the curves
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    axes.grid(alpha=0.3)
    target = Path(path)
    try:
        save_figure(figure, target, 110)
    finally:
        plt.close(figure)
    return target
