"""Toy acceptance arithmetic; each function's operator mutants have a known verdict."""

import functools


def num_accepted(draft_ids, target_ids):
    for i, (d, t) in enumerate(zip(draft_ids, target_ids)):  # noqa: B905 (strict= would add mutants)
        if d != t:
            return i
    return len(draft_ids)


def bonus_len(num_accepted):
    return num_accepted + 1


def scale(x):
    return x * 1


def untested(x):
    return x * 2


@functools.cache
def cached(x):
    return x - 1
