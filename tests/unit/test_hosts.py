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
    ],
)
def test_bad_field_is_named(field, value):
    with pytest.raises(InvalidHostError) as caught:
        make(**{field: value})
    assert caught.value.field == field
    assert field in str(caught.value)


def test_host_is_frozen_and_normalised():
    host = make(lam=1, cores=4)
    assert isinstance(host.lam, float)
    assert host.capacity == pytest.approx(4 * 0.8)
    with pytest.raises(AttributeError):
        host.rho = 0.5  # type: ignore[misc]
