"""The two-moment fits against scipy.stats' own distributions (an independent reference)."""

import numpy as np
import pytest
from scipy import stats

from scheduler import fits


@pytest.mark.parametrize("cov", [0.05, 0.3, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("name", ["gamma", "weibull", "lognormal"])
def test_fit_matches_mean_and_variance(name, cov):
    mean = 123.0
    var = (cov * mean) ** 2
    p1, p2 = fits.fit(np.array([fits.CODES[name]]), np.array([mean]), np.array([var]))
    law = {
        "gamma": lambda: stats.gamma(p1[0], scale=p2[0]),
        "weibull": lambda: stats.weibull_min(p1[0], scale=p2[0]),
        "lognormal": lambda: stats.lognorm(p1[0], scale=np.exp(p2[0])),
    }[name]()
    assert law.mean() == pytest.approx(mean, rel=1e-9)
    assert law.var() == pytest.approx(var, rel=1e-8)
    y = np.array([0.1, 50.0, 123.0, 400.0, 2000.0])
    code = np.full(y.shape, fits.CODES[name])
    assert np.allclose(fits.sf(code, p1[0], p2[0], y), law.sf(y), rtol=1e-9, atol=1e-20)
    q = np.array([0.5, 1e-3, 1e-10])
    assert np.allclose(fits.isf(np.full(q.shape, fits.CODES[name]), p1[0], p2[0], q),
                       law.isf(q), rtol=1e-7)


def test_weibull_shape_inverts_the_cov_over_a_wide_range():
    cov = np.geomspace(1e-3, 200, 60)
    k = fits.weibull_shape(cov)
    measured = [stats.weibull_min(shape).std() / stats.weibull_min(shape).mean() for shape in k]
    assert np.allclose(measured, cov, rtol=1e-6)
    # below the table the asymptotic form takes over: nearly deterministic, still close
    tiny = np.array([1e-4, 3e-4])
    measured = [stats.weibull_min(s).std() / stats.weibull_min(s).mean()
                for s in fits.weibull_shape(tiny)]
    assert np.allclose(measured, tiny, rtol=1e-3)


@pytest.mark.parametrize("cov", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("name", ["gamma", "weibull", "lognormal"])
def test_family_objects_agree_with_scipy(name, cov):
    family = fits.BY_NAME[name]
    assert fits.FAMILIES[family.code] is family and fits.NAMES[family.code] == name
    mean = np.array([2.0, 40.0, 900.0])
    var = (cov * mean) ** 2
    p1, p2 = family.fit(mean, var)
    laws = {
        "gamma": lambda a, b: stats.gamma(a, scale=b),
        "weibull": lambda a, b: stats.weibull_min(a, scale=b),
        "lognormal": lambda a, b: stats.lognorm(a, scale=np.exp(b)),
    }
    for i in range(len(mean)):
        law = laws[name](p1[i], p2[i])
        assert family.mean(p1[i], p2[i]) == pytest.approx(law.mean(), rel=1e-10)
        assert family.variance(p1[i], p2[i]) == pytest.approx(law.var(), rel=1e-8)
        y = mean[i] * np.array([0.2, 1.0, 3.0])
        assert np.allclose(family.cdf(p1[i], p2[i], y), law.cdf(y), rtol=1e-9, atol=1e-15)
        prob = np.array([0.1, 0.5, 0.99])
        assert np.allclose(family.quantile(p1[i], p2[i], prob), law.ppf(prob), rtol=1e-7)


def test_mixed_codes_send_each_element_to_its_family():
    rho = np.array([0.05, 0.3, 0.7, 0.1])
    code = fits.family_codes("auto", rho)
    assert [fits.NAMES[int(c)] for c in code] == ["gamma", "weibull", "lognormal", "gamma"]
    mean, var = np.array([10.0, 20.0, 30.0, 40.0]), np.array([50.0, 400.0, 2000.0, 100.0])
    p1, p2 = fits.fit(code, mean, var)
    assert np.allclose(fits.mean(code, p1, p2), mean, rtol=1e-9)
    assert np.allclose(fits.variance(code, p1, p2), var, rtol=1e-8)
    y = np.array([5.0, 25.0, 60.0, 41.0])
    alone = [fits.FAMILIES[int(c)].sf(a, b, v) for c, a, b, v in zip(code, p1, p2, y)]
    assert np.allclose(fits.sf(code, p1, p2, y), alone, rtol=1e-12)
    q = np.array([0.5, 0.1, 1e-4, 0.9])
    assert np.allclose(fits.sf(code, p1, p2, fits.isf(code, p1, p2, q)), q, rtol=1e-7)


def test_unknown_distribution_names_the_choices():
    from scheduler.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="gamma, weibull, lognormal, auto") as err:
        fits.family_codes("pareto", np.array([0.1]))
    assert err.value.field == "dist" and err.value.value == "pareto"


def test_a_weibull_survival_far_in_its_tail_is_zero_without_an_overflow_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        survival = fits.sf(np.array(fits.WEIBULL), np.array(5.0), np.array(1e-3),
                           np.array([1e300, 1e-3]))
    assert survival[0] == 0.0 and survival[1] == pytest.approx(np.exp(-1.0))
