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


def test_host_is_frozen_and_normalised():
    host = make(lam=1, cores=4)
    assert isinstance(host.lam, float)
    assert host.capacity == pytest.approx(4 * 0.8)
    with pytest.raises(AttributeError):
        host.rho = 0.5  # type: ignore[misc]
