from ghs.experiments import distributions, envelope
from scheduler.model import DEFAULT_DIST


def test_distribution_study_still_recommends_the_default():
    result = distributions.run(runs=20_000, seed=11)
    assert result["recommended"] == DEFAULT_DIST
    assert len(result["cases"]) == 18
    for case in result["cases"]:
        # every fit shares the exact mean; the study is about the tails
        for errors in case["errors"].values():
            assert abs(errors["mean"]) < 0.01


def test_paths_pool_each_draws_tasks_in_seed_order(monkeypatch):
    import numpy as np
    import pytest

    from ghs.errors import GhsError
    from ghs.experiments import error_vs_length

    calls = []

    def drawn(name, size, seed, **options):
        # a draw's task table: rows are launches, one column per length, marked by its seed
        calls.append((name, size, seed, options))
        table = {"valid": np.ones((size, 2), bool), "ours": np.full((size, 2), float(seed))}
        return {"name": name, "info": {"seed": seed}, "launches": size,
                "single_hours": [1.0, 2.0], "parallel_hours": [8.0, 16.0],
                "single": table, "parallel": {k: v[:1] for k, v in table.items()}}

    monkeypatch.setattr(error_vs_length, "collect_family", drawn)
    seeds = error_vs_length.path_seeds(4, 3)
    assert seeds == [4, 5, 6]
    pooled, each = error_vs_length.collect_paths("trace", 2, seeds, stations=8)
    assert [c[2] for c in calls] == seeds and all(c[3] == {"stations": 8} for c in calls)
    assert [family["info"]["seed"] for family in each] == seeds
    assert pooled["launches"] == 6 and pooled["info"] == {"seed": 4}
    np.testing.assert_array_equal(pooled["single"]["ours"][:, 0], [4, 4, 5, 5, 6, 6])
    np.testing.assert_array_equal(pooled["parallel"]["ours"][:, 1], [4, 5, 6])
    assert pooled["single"]["valid"].shape == (6, 2)
    # one draw is the family itself, untouched
    alone, _ = error_vs_length.collect_paths("trace", 2, [9])
    assert alone["launches"] == 2 and alone["single"]["ours"].shape == (2, 2)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(GhsError, match="paths must be a whole number >= 1"):
            error_vs_length.path_seeds(7, bad)


def test_envelope_finds_the_fit_exact_on_long_light_shares_and_late_on_heavy_tails():
    # what ghs.answers.fit_range tells a host file's user: within 3% of the simulator at
    # 100x the mean demand with a CoV of 1, and late at a CoV of 10 however long the share
    result = envelope.run(runs=20_000, seed=5, utilisations=(0.5,), covs=(1.0, 10.0),
                          ratios=(100.0,))
    light, heavy = result["cases"]
    assert (light["cov"], heavy["cov"]) == (1.0, 10.0)
    assert abs(light["errors"]["p90"]) < 0.03 and abs(light["errors"]["p95"]) < 0.03
    assert heavy["errors"]["p90"] > 0.05 and heavy["errors"]["p95"] > 0.05
    for case in result["cases"]:
        assert abs(case["errors"]["mean"]) < 0.01  # the fit's mean is exact
    assert [row["p90"] for row in result["worst"]] == [c["errors"]["p90"] for c in
                                                      result["cases"]]


def test_envelope_from_the_steady_state_starts_both_there():
    result = envelope.run(runs=4_000, seed=5, utilisations=(0.5,), covs=(1.0,),
                          ratios=(100.0,), warm=True)
    (case,) = result["cases"]
    assert result["warm"] is True
    # the warm queue's backlog lengthens the run beside an idle start's t / (1 - rho)
    assert case["simulated"]["mean"] > case["work_seconds"] / 0.5 * 1.005
    assert abs(case["errors"]["mean"]) < 0.02 and abs(case["errors"]["p90"]) < 0.05
