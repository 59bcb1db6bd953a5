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

pytestmark = pytest.mark.usefixtures("fresh_registry")  # an empty mutation registry around every test


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


def test_nothing_imports_what_3_10_lacks_directly() -> None:
    """Every module reads `tomllib` and `StrEnum` through the compat shims, so the package imports on 3.10."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shims = {root / "verify" / "compat.py", root / "runner" / "compat.py"}
    bad = []
    for package in ("verify", "runner", "mutations", "tests", "benchmarks", "examples"):
        for path in sorted((root / package).rglob("*.py")):
            if path in shims or "fixtures" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import) and any(a.name == "tomllib" for a in node.names):
                    bad.append(f"{path.relative_to(root)}: import tomllib")
                if isinstance(node, ast.ImportFrom) and node.module == "enum":
                    if any(a.name == "StrEnum" for a in node.names):
                        bad.append(f"{path.relative_to(root)}: from enum import StrEnum")
    assert not bad, "use verify.compat (runner.compat in runner/): " + "; ".join(bad)
