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
