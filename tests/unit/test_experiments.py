from ghs.experiments import distributions
from scheduler.model import DEFAULT_DIST


def test_distribution_study_still_recommends_the_default():
    result = distributions.run(runs=20_000, seed=11)
    assert result["recommended"] == DEFAULT_DIST
    assert len(result["cases"]) == 18
    for case in result["cases"]:
        # every fit shares the exact mean; the study is about the tails
        for errors in case["errors"].values():
            assert abs(errors["mean"]) < 0.01
