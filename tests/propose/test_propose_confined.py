"""The proposals' import probe (`verify.propose.check`) runs the project's module-level code under each mutant:
confined like a sweep's mutmut, it writes nothing of the user's; unconfined, a write to the user's tree is a
`ProbeError`, as is a kernel that refuses the confinement; what the code leaves running ends with the probe;
a package of the project's named `verify` does not stand in for the harness's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli import app
from verify.propose.check import ProbeError, import_failures
from verify.propose.edit import BugClass
from verify.propose.scanner import scan_text
from verify.sandbox import launch
from verify.sandbox.confine import probe

ENGINE = "residual = target_probs - draft_probs\n"


def _project(root: Path, prelude: str) -> tuple[Path, list]:
    """A project whose one engine module runs `prelude` on import, and the scanner's proposals for it."""
    (root / "engine").mkdir(parents=True)
    (root / "engine" / "__init__.py").write_text("")
    text = f"import torch\n{prelude}\ntarget_probs = torch.ones(3)\ndraft_probs = torch.zeros(3)\n{ENGINE}"
    (root / "engine" / "sample.py").write_text(text)
    proposals, _ = scan_text(text, "engine/sample.py", (BugClass.RESIDUAL,))
    assert proposals
    return root, proposals


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.skipif(not probe().active, reason="needs Landlock")
def test_confined_the_projects_code_writes_nothing_of_the_users(tmp_path) -> None:
    outside = tmp_path / "home" / ".bashrc"
    outside.parent.mkdir()
    outside.write_text("# the user's\n")
    root = tmp_path / "project"
    escape = f"open({str(root / 'escaped.txt')!r}, 'w').write('x'); open({str(outside)!r}, 'a').write('x')"
    root, proposals = _project(root, f"try:\n    {escape}\nexcept PermissionError:\n    pass")
    before = _files(root)
    assert import_failures(root, ["."], proposals) == {}  # the module imports: only its writes were refused
    assert _files(root) == before and outside.read_text() == "# the user's\n"


def test_unconfined_a_write_to_the_users_tree_is_a_probe_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DFLASH_CONFINE", "off")
    root = tmp_path / "project"
    root, proposals = _project(root, f"open({str(root / 'escaped.txt')!r}, 'w').write('x')")
    with pytest.raises(ProbeError, match=r"changed the user's files: escaped\.txt \(new, while the import-probe child"):
        import_failures(root, ["."], proposals)


def test_a_kernel_that_refuses_the_confinement_imports_nothing(tmp_path, monkeypatch) -> None:
    refusing = tmp_path / "refusing_launch.py"
    refusing.write_text(
        f"import sys\nprint({launch.REFUSAL!r} + ' (landlock_restrict_self: Operation not permitted)' + "
        f"{launch.NOT_RUN!r}, file=sys.stderr)\nsys.exit({launch.REFUSED})\n"
    )
    monkeypatch.setattr(launch, "__file__", str(refusing))  # the script the probe starts as its launcher
    root, proposals = _project(tmp_path / "project", "")
    with pytest.raises(ProbeError) as raised:
        import_failures(root, ["."], proposals)
    assert str(raised.value) == (
        "the kernel refused to confine the import probe of the proposals (landlock_restrict_self: Operation not "
        "permitted); nothing was imported or written"
    )


def test_what_the_projects_code_leaves_running_ends_with_the_probe(tmp_path) -> None:
    # A daemon of its own session, started by each import (the original's and the mutant's).
    root, proposals = _project(
        tmp_path / "project", "_d = __import__('subprocess').Popen(['sleep', '73'], start_new_session=True)"
    )
    assert import_failures(root, ["."], proposals) == {}
    assert _sleepers() == []


def _sleepers() -> list[int]:
    """The `sleep 73` processes left on the machine."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"73"]:
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_projects_own_verify_package_does_not_stand_in_for_the_harness(tmp_path) -> None:
    root, proposals = _project(tmp_path / "project", "")
    (root / "verify").mkdir()
    (root / "verify" / "__init__.py").write_text("raise SystemExit('the project's verify was imported')\n")
    assert import_failures(root, ["."], proposals) == {}


def test_propose_says_the_probe_error_and_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DFLASH_CONFINE", "off")
    root = tmp_path / "project"
    root, _ = _project(root, f"open({str(root / 'escaped.txt')!r}, 'w').write('x')")
    (root / "tests" / "gates").mkdir(parents=True)
    table = '[tool.dflash]\nsource_roots = ["engine"]\nmutation_modules = ["proposed_mutations"]\n'
    (root / "pyproject.toml").write_text(table)
    result = CliRunner().invoke(app, ["mutations", "propose", "--project", str(root)])
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert "changed the user's files: escaped.txt (new, while the import-probe child ran)" in said, said
    assert not (root / "proposed_mutations.py").exists()
