"""How ``ghs experiment live`` scores its tasks: coverage, error and width, and the targets,
each run's p90 coverage read against a p90 that is exactly right as well."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scipy import stats

TARGETS = {"p90_coverage": 0.85, "mean_error": 0.15}
# the level the p90 claims: a run's coverage is read against it as well as against the target
P90_NOMINAL = 0.9


def summarise(tasks: Sequence[dict[str, Any]], predictor: str | None = None
              ) -> dict[str, Any]:
    """Coverage of p50/p90 (a stopped task counts as a miss), mean |error| of the mean
    relative to the realised time, and the median p90/p50 width; of the manager's prediction
    or of one computed ``beside`` it."""
    if predictor is not None:
        tasks = [{**t, **t["beside"][predictor]} for t in tasks]
    if not tasks:
        return {"tasks": 0, "p50_coverage": None, "p90_coverage": None,
                "p90_covered_tasks": None, "mean_error": None, "median_width": None,
                "stopped": 0}
    finished = [t for t in tasks if t["realised_seconds"] is not None]

    def by(level: str) -> int:
        return sum(1 for t in finished if t["realised_seconds"] <= t["quantiles"][level])

    errors = sorted(abs(t["mean"] - t["realised_seconds"]) / t["realised_seconds"]
                    for t in finished)
    widths = sorted(t["quantiles"]["p90"] / t["quantiles"]["p50"] for t in tasks)
    p90_covered = by("p90")
    return {"tasks": len(tasks), "stopped": len(tasks) - len(finished),
            "p50_coverage": by("p50") / len(tasks), "p90_coverage": p90_covered / len(tasks),
            "p90_covered_tasks": p90_covered,
            "mean_error": sum(errors) / len(errors) if errors else None,
            "median_width": widths[len(widths) // 2],
            "mean_realised_seconds": (sum(t["realised_seconds"] for t in finished)
                                      / len(finished) if finished else None),
            "mean_predicted_seconds": sum(t["mean"] for t in tasks) / len(tasks)}


def nominal_chances(summary: dict[str, Any], level: float = P90_NOMINAL) -> dict[str, Any]:
    """How a run's p90 coverage reads against a p90 that is exactly right: the chance that
    such a predictor covers at most, and at least, as many of the run's tasks (binomial,
    each task covered with probability ``level``; None without tasks). A 30-minute run has
    about 22 tasks, where a calibrated p90 covers 18 or fewer (under 85%) about one run in
    six: one run's miss of the target says little, and so does one run's 100%."""
    tasks, covered = summary["tasks"], summary.get("p90_covered_tasks")
    if not tasks or covered is None:
        return {"nominal": level, "nominal_at_most_chance": None,
                "nominal_at_least_chance": None}
    return {"nominal": level,
            "nominal_at_most_chance": float(stats.binom.cdf(covered, tasks, level)),
            "nominal_at_least_chance": float(stats.binom.sf(covered - 1, tasks, level))}


def targets(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each target with the run's figure and whether it was met (None without one); the
    p90's with :func:`nominal_chances`."""
    measured = {"p90_coverage": summary["p90_coverage"], "mean_error": summary["mean_error"]}
    return {key: {"target": target, "measured": measured[key],
                  "met": None if measured[key] is None else (
                      measured[key] >= target if key == "p90_coverage"
                      else measured[key] <= target),
                  **(nominal_chances(summary) if key == "p90_coverage" else {})}
            for key, target in TARGETS.items()}
