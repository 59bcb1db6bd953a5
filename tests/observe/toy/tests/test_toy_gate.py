import pytest

pytestmark = pytest.mark.gate


def test_nothing_useful() -> None:
    assert True
