"""The texts of the small arithmetic package the ceiling, cgroup and integrity tests build their hostile projects
around (`hostile.core`) and of its two gates: one copy, so a change to the project reaches every test."""

CORE = '''"""Code under test."""


def add(a, b):
    return a + b


def mul(a, b):
    return a * b
'''

GATES = """import pytest
from hostile import core


@pytest.mark.gate
def test_add():
    assert core.add(2, 3) == 5


@pytest.mark.gate
def test_mul():
    assert core.mul(4, 3) == 12
"""
