"""Writing a figure to the path a user gave (``--plot``): one check and one error for every
command that draws one."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from ghs.errors import GhsError


def plot_path_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot take a PNG (its folder missing or not writable), or None. Checked
    before a command runs: a back-test or an experiment takes minutes, and its figure is
    written last."""
    folder = Path(path).expanduser().parent
    if not folder.is_dir():
        return f"folder {str(folder)!r} does not exist"
    if not os.access(folder, os.W_OK):
        return f"folder {str(folder)!r} is not writable"
    suffix = Path(path).suffix.lower().lstrip(".")
    known = _formats()
    if suffix and known is not None and suffix not in known:
        # matplotlib picks the format by the name's ending (none: PNG)
        return f"matplotlib cannot write .{suffix} files (it writes {', '.join(sorted(known))})"
    return None


def _formats() -> set[str] | None:
    """The file formats matplotlib writes (None without matplotlib: the command says so)."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return None
    return set(FigureCanvasBase.get_supported_filetypes())


def save_figure(figure: Any, path: str | Path, dpi: int) -> None:
    """Write a matplotlib ``figure`` to ``path`` as a PNG; a file that cannot be written is
    a one-line GhsError naming it."""
    try:
        with warnings.catch_warnings():
            # a host name in a script the font lacks (CJK, a tab) is drawn as a box, which
            # is no reason to print warnings under a successful command
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
            figure.savefig(Path(path).expanduser(), dpi=dpi)
    except OSError as exc:
        raise GhsError(f"cannot write the plot to {str(path)!r}: {exc.strerror or exc}",
                       field="plot", value=str(path)) from None
    except ValueError as exc:  # a format matplotlib does not write
        raise GhsError(f"cannot write the plot to {str(path)!r}: {exc}", field="plot",
                       value=str(path)) from None
