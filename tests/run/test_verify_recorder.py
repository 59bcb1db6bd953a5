"""The children's pytest plugin on its own: one run of the gates shared through a claims folder."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

# Two gate folders, each with a fixture whose teardown is logged: a child that skips a claimed file must still
# tear down what the next gate it runs does not share, or pytest stops with "previous item was not torn down".
CONFTEST = """import os
import pytest


@pytest.fixture(scope="package")
def resource():
    yield 1
    with open(os.environ["TEARDOWN_LOG"], "a") as log:
        log.write(__name__ + "\\n")
"""
GATE = """import pytest


@pytest.mark.gate
def test_{name}_one(resource):
    assert resource == 1


@pytest.mark.gate
def test_{name}_two(resource):
    assert resource == 1
"""

RUN = """import json, sys
from pathlib import Path
import pytest
from verify.run.child.recorder import Recorder

journal, claims = Path(sys.argv[1]), Path(sys.argv[2])
recorder = Recorder(journal, claims=claims)
code = pytest.main(["first", "second", "-m", "gate", "-q", "-p", "no:cacheprovider"], plugins=[recorder])
print(json.dumps({"exit": int(code), "order": recorder.order}))
"""


def _project(root: Path) -> Path:
    (root / "pytest.ini").parent.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    gate: a gate\n")
    for folder, files in (("first", ("a", "b")), ("second", ("c",))):
        (root / folder).mkdir()
        (root / folder / "__init__.py").write_text("")
        (root / folder / "conftest.py").write_text(CONFTEST)
        for name in files:
            (root / folder / f"test_{name}.py").write_text(GATE.format(name=name))
    return root


def _claim(claims: Path, file: str) -> None:
    (claims / hashlib.sha256(file.encode()).hexdigest()).touch()


def _run(root: Path, claims: Path, log: Path) -> tuple[dict, list[dict]]:
    journal = root / "journal.jsonl"
    journal.unlink(missing_ok=True)
    env = {"TEARDOWN_LOG": str(log), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(journal), str(claims)],
        cwd=root, env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
    return json.loads(done.stdout.strip().splitlines()[-1]), records


def test_a_claimed_file_is_skipped_whole_and_the_next_folders_gates_still_run(tmp_path) -> None:
    root = _project(tmp_path / "p")
    claims = tmp_path / "claims"
    claims.mkdir()
    # Another child holds test_b.py, the last file of the first folder: the plugin skips it, then has to
    # leave the first folder's package (its fixture torn down) before the second folder's gates.
    _claim(claims, "first/test_b.py")
    summary, records = _run(root, claims, tmp_path / "teardowns")
    assert summary["exit"] == 0
    finished = [r["gate_id"] for r in records if "gate_id" in r]
    assert finished == [
        "first/test_a.py::test_a_one", "first/test_a.py::test_a_two", "second/test_c.py::test_c_one",
        "second/test_c.py::test_c_two",
    ]  # fmt: skip
    assert all(r["outcome"] == "passed" for r in records if "gate_id" in r)
    assert [r["started"] for r in records if "started" in r] == finished  # the claimed gates left no trace
    assert len(summary["order"]) == 6  # every gate collected, run here or not
    assert (tmp_path / "teardowns").read_text().split() == ["first.conftest", "second.conftest"]
    # Every file was claimed by the first child: a second one runs nothing and reports nothing.
    summary, records = _run(root, claims, tmp_path / "teardowns-2")
    assert summary["exit"] == 0 and records == []
    assert not (tmp_path / "teardowns-2").exists()  # nothing set up, nothing torn down


END_RUN = """import json, os, sys
from pathlib import Path
import pytest
from verify.run.child.recorder import Recorder

journal, seen = Path(sys.argv[1]), Path(sys.argv[2])


def end(status):
    # What the child does there: its result written from the journal as it stands, then the process ends.
    seen.write_text(json.dumps({"status": status, "journal": journal.read_text().splitlines()}))
    os._exit(0)


code = pytest.main([*sys.argv[3:], "-q", "-p", "no:cacheprovider"], plugins=[Recorder(journal, on_session_end=end)])
print(json.dumps({"exit": int(code)}))
"""
END_CONFTEST = """import os


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["FINISH_LOG"], "a") as log:
        log.write("sessionfinish\\n")
"""
END_GATES = """def test_green():
    assert True


def test_red():
    assert 1 == 2
"""


def _end_run(root: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    journal, seen, log = root / "journal.jsonl", root / "seen.json", root / "finish.log"
    env = {"FINISH_LOG": str(log), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", END_RUN, str(journal), str(seen), *args],
        cwd=root, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done, seen, log


def test_the_child_ends_once_every_gate_is_journalled_before_pytests_own_end_of_session(tmp_path) -> None:
    (tmp_path / "conftest.py").write_text(END_CONFTEST)
    (tmp_path / "test_gates.py").write_text(END_GATES)
    done, seen, log = _end_run(tmp_path, "test_gates.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"exit"' not in done.stdout, "pytest.main returned: the session was not ended at its end"
    ended = json.loads(seen.read_text())
    assert ended["status"] == 1  # a gate failed
    records = [json.loads(line) for line in ended["journal"]]
    outcomes = {r["gate_id"]: r["outcome"] for r in records if "gate_id" in r}
    assert outcomes == {"test_gates.py::test_green": "passed", "test_gates.py::test_red": "assertion"}
    assert not log.exists(), "the project's own sessionfinish ran: the end came after pytest's"


def test_a_session_pytest_refused_ends_its_own_way(tmp_path) -> None:
    (tmp_path / "test_gates.py").write_text(END_GATES)
    done, seen, _ = _end_run(tmp_path, "test_gates.py", "--no-such-option")
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"exit": 4}  # usage error, words in the log
    assert not seen.exists()
