import math

import pytest

from scheduler import Host, InvalidHostError


def make(**changes):
    values = dict(name="ws", lam=0.002, mu=0.01, sigma=100.0, rho=0.2, tau=1.0, cores=1)
    values.update(changes)
    return Host(**values)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lam", -0.1),
        ("mu", 0.0),
        ("mu", -1.0),
        ("sigma", -1.0),
        ("rho", 1.0),
        ("rho", -0.01),
        ("rho", 1.5),
        ("tau", 0.0),
        ("tau", -2.0),
        ("cores", 0),
        ("cores", 1.5),
        ("lam", math.nan),
        ("sigma", math.inf),
        ("rho", "high"),
        ("name", ""),
        # finite, yet past any workstation: the model's moments overflowed to NaN
        ("lam", 1e308),
        ("mu", 1e-308),
        ("sigma", 1e200),
        # a capacity of 1e308 overflowed the equal-mean split to inf
        ("tau", 1e308),
        ("tau", 1e-9),
    ],
)
def test_bad_field_is_named(field, value):
    with pytest.raises(InvalidHostError) as caught:
        make(**{field: value})
    assert caught.value.field == field
    assert field in str(caught.value)


def test_a_range_refusal_gives_the_range():
    with pytest.raises(InvalidHostError, match=r"lam must be in \[0, 1e\+06\] jobs/s"):
        make(lam=1e7)
    with pytest.raises(InvalidHostError, match=r"a mean of at most 1e\+12 s"):
        make(mu=1e-13)


def test_a_chance_of_interruption_below_1e12_is_none_and_the_prediction_finite():
    from scheduler import predict

    # a measured rho far above lam / mu: the delay's mean was put on a chance of 3.6e-297
    # and its square overflowed (mean and std NaN)
    prediction = predict([make(lam=1e-300, mu=1.0, sigma=1.0, rho=0.1)], 3600.0)
    assert prediction.mean == pytest.approx(3600.0) and prediction.std == 0.0
    # just above the threshold the delay is still counted, and finite
    counted = predict([make(lam=1e-11, mu=1.0, sigma=1.0, rho=0.1)], 3600.0)
    assert math.isfinite(counted.std) and counted.mean == pytest.approx(3600.0 / 0.9, rel=1e-4)


@pytest.mark.parametrize("dist", ["gamma", "weibull", "lognormal"])
def test_a_delay_too_small_to_move_the_time_is_none_and_the_prediction_finite(dist):
    from scheduler import predict

    # a forecast rho of 1e-178 beside arrivals at 1.4e-4/s (a station idle for days after
    # its users stopped): the delay's mean of 1e-174 s squared underflowed beside the
    # arrivals' variance, and the fitted delay law read NaN
    for mu in (1.0 / 1.2e-178, 1e6):
        prediction = predict([make(lam=1.4e-4, mu=mu, sigma=1.0 / mu, rho=1.2e-178)], 14400.0,
                             dist)
        assert prediction.mean == 14400.0 and prediction.std == 0.0
        assert set(prediction.quantiles.values()) == {14400.0}
    # a load that can move it still does
    moved = predict([make(lam=1.4e-4, mu=1e6, sigma=1e-6, rho=1e-9)], 14400.0, dist)
    assert moved.mean == pytest.approx(14400.0 * (1 + 1e-9), rel=1e-12)


def test_utilisation_law_mu_keeps_the_mean_demand_inside_any_workstations():
    from scheduler.hosts import MAX_DEMAND_SECONDS, MIN_DEMAND_SECONDS, utilisation_law_mu

    assert utilisation_law_mu(0.01, 0.5) == pytest.approx(0.02)
    assert utilisation_law_mu(0.01, 0.5, cores=2) == pytest.approx(0.01)
    assert utilisation_law_mu(1.4e-4, 1.2e-178) == 1.0 / MIN_DEMAND_SECONDS
    assert utilisation_law_mu(1e-24, 0.54) == 1.0 / MAX_DEMAND_SECONDS
    assert utilisation_law_mu(0.0, 0.5) == utilisation_law_mu(0.01, 0.0) == 1.0


def test_host_is_frozen_and_normalised():
    host = make(lam=1, cores=4)
    assert isinstance(host.lam, float)
    assert host.capacity == pytest.approx(4 * 0.8)
    with pytest.raises(AttributeError):
        host.rho = 0.5  # type: ignore[misc]
