import pytest
from toyrunner.accept import bonus_len, cached, num_accepted, scale


@pytest.mark.gate
def test_num_accepted():
    assert num_accepted([1, 2, 3], [1, 2, 4]) == 2
    assert num_accepted([5], [6]) == 0
    assert num_accepted([7, 8], [7, 8]) == 2


@pytest.mark.gate
def test_bonus_is_more_than_accepted():
    # Too weak on purpose: `+ 2` survives it.
    assert bonus_len(2) > 2


@pytest.mark.gate
def test_cached_decrements():
    # `cached` is under @functools.cache: mutmut alone never mutates it; the sweep's copy undecorates it.
    assert cached(3) == 2


@pytest.mark.gate
def test_scale_keeps_value():
    assert scale(3) == 3


@pytest.mark.gate
@pytest.mark.gpu
def test_needs_cuda():
    raise AssertionError("the sweep must deselect gpu gates")
