import pytest
from toy import arith, text


@pytest.mark.gate
def test_add():
    assert arith.add(2, 3) == 5


@pytest.mark.gate
def test_sub():
    assert arith.sub(5, 3) == 2


@pytest.mark.gate
def test_mul():
    assert arith.mul(4, 3) == 12


@pytest.mark.gate
def test_describe_runs():
    # Deliberately vacuous: it calls describe() and checks nothing, so no mutant turns it red.
    text.describe(3)


def test_not_a_gate():
    assert text.shout("a") == "A"
