"""The Python 3.10 shim renders verdicts as 3.11's StrEnum does: one JSON report and one terminal line on both.

On 3.11+ this pins enum.StrEnum; the CI step on Python 3.10 runs it against verify/compat.py's and
runner/compat.py's fallback classes.
"""

from __future__ import annotations

import json
from enum import Enum

import pytest

from runner.request import FinishReason
from verify.compat import tomllib
from verify.report.verdict import Outcome, Status


@pytest.mark.parametrize(
    "member", [Status.KILLED, Outcome.NOT_RUN, FinishReason.STOP], ids=["verify-status", "outcome", "runner"]
)
def test_a_str_enum_member_is_its_value_everywhere(member: Enum) -> None:
    value = member.value
    assert isinstance(member, str) and member == value
    assert (str(member), f"{member}", f"{member:>9}") == (value, value, f"{value:>9}")
    assert json.dumps({member: [member]}) == json.dumps({value: [value]})
    assert type(member)(value) is member


def test_tomllib_reads_and_refuses_as_3_11_does() -> None:
    assert tomllib.loads('[tool.dflash]\ngates = ["tests/gates"]') == {"tool": {"dflash": {"gates": ["tests/gates"]}}}
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads("[tool\n")
