"""What the experiments' figures share: counted nouns, legends beside the axes, axis limits
set by the lines that matter."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 workstation``, ``32 workstations``."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def legend_beside(axes: Any, **options: Any) -> Any:
    """A legend right of ``axes``, so it never covers a line (the figure must leave room:
    use a constrained layout)."""
    return axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                       **options)


def log_limits(values: Iterable[float | None], margin: float = 1.3) -> tuple[float, float]:
    """Log-axis limits spanning the finite positive ``values`` with a margin factor.

    Reference lines (a clairvoyant predictor's error near zero) are drawn but left out of
    these values, so they cannot stretch the axis over decades and flatten the lines that
    are compared.
    """
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not finite:
        return 1e-3, 1.0
    return min(finite) / margin, max(finite) * margin


def note_off_axis(axes: Any, what: str, values: Iterable[float | None],
                  limits: tuple[float, float]) -> bool:
    """Write "WHAT: partly off the axis" in a corner of ``axes`` when some of ``values`` fall
    outside ``limits``; True if it did."""
    low, high = limits
    outside = any(v is not None and math.isfinite(v) and not low <= v <= high for v in values)
    if outside:
        axes.annotate(f"{what}: partly off the axis", xy=(0.02, 0.02),
                      xycoords="axes fraction", fontsize="x-small", color="dimgrey")
    return outside
