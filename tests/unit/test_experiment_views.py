"""Experiments compute plain data; ghs.experiments.tables and .plots alone render it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ghs.experiments import distributions, envelope, plots, tables

EXPERIMENTS = Path(__file__).resolve().parents[2] / "ghs" / "experiments"
STUDIES = ("calibration", "distributions", "envelope", "error_vs_length", "partition",
           "sampling_cost", "selection", "trace_study")
TABLE_ONLY = ("distributions", "envelope")
RENDERING = ("rich", "matplotlib")


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("study", STUDIES)
def test_compute_modules_do_not_render(study):
    imported = _imported(EXPERIMENTS / f"{study}.py")
    assert not [name for name in imported if name.split(".")[0] in RENDERING]
    assert callable(getattr(tables, f"show_{study}"))
    if study not in TABLE_ONLY:
        assert callable(getattr(plots, f"plot_{study}"))


def test_a_result_renders_from_its_json_alone(tmp_path):
    from rich.console import Console

    result = distributions.run(runs=200, seed=3)
    again = json.loads(json.dumps(result, allow_nan=False))
    console = Console(width=200, record=True)
    tables.show_distributions(console, again)
    text = console.export_text()
    assert f"recommended default: {result['recommended']}" in text
    assert all(fit in text for fit in distributions.FITS)


def test_the_envelope_renders_from_its_json_with_a_case_not_simulated():
    from rich.console import Console

    result = envelope.run(runs=200, seed=3, utilisations=(0.5,), covs=(1.0,), ratios=(10.0,))
    result["cases"].append({"rho": 0.8, "cov": 1.0, "ratio": 10.0, "work_seconds": 1000.0,
                            "simulated": None, "errors": None, "not_simulated": "too long"})
    again = json.loads(json.dumps(result, allow_nan=False))
    console = Console(width=200, record=True)
    tables.show_envelope(console, again)
    text = console.export_text()
    assert "task 10x demand" in text and "not simulated: too long to walk" in text
