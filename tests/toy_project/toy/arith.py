"""Arithmetic the gates check (add, sub, mul) and one function no gate calls (orphan)."""


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def orphan(a):
    return a % 7
