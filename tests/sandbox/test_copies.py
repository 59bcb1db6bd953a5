"""The executor's private copies: one left exactly as it was made serves the next child; any trace of a child
(a rewrite that kept size and mtime, a new or removed file, a chmod, a link) gets it deleted; and a change to
the pristine tree retires every copy made before it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from verify.sandbox.copies import CopyPool


@pytest.fixture
def pool(tmp_path: Path) -> CopyPool:
    pristine = tmp_path / "pristine"
    (pristine / "pkg" / "__pycache__").mkdir(parents=True)
    (pristine / "pkg" / "a.py").write_text("x = 1\n")
    (pristine / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0" * 16)
    (pristine / "pyproject.toml").write_text("[tool.dflash]\n")
    return CopyPool(pristine, tmp_path / "copies")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_copy_left_as_made_serves_the_next_child(pool: CopyPool) -> None:
    first = pool.take()
    assert _files(first) == _files(pool.pristine)
    (first / "pkg" / "a.py").read_text()  # reading leaves no trace
    assert pool.give_back(first)
    assert pool.take() == first
    assert pool.made == 1


def _rewrite_keeping_size_and_mtime(copy: Path) -> None:
    path = copy / "pkg" / "a.py"
    before = path.stat()
    path.write_text("x = 2\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


TRACES: dict[str, Callable[[Path], object]] = {
    "rewritten, size and mtime kept": _rewrite_keeping_size_and_mtime,
    "new file": lambda copy: (copy / "pkg" / "planted.py").write_text("import os\n"),
    "new bytecode": lambda copy: (copy / "pkg" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"x"),
    "removed": lambda copy: (copy / "pyproject.toml").unlink(),
    "chmod": lambda copy: (copy / "pkg" / "a.py").chmod(0o777),
    "hard link elsewhere": lambda copy: os.link(copy / "pkg" / "a.py", copy.parent / "outside"),
    "folder replaced": lambda copy: (
        (copy / "pkg" / "__pycache__").rename(copy / "old") or (copy / "pkg" / "__pycache__").mkdir()
    ),
}


@pytest.mark.parametrize("trace", list(TRACES), ids=list(TRACES))
def test_a_copy_a_child_touched_is_deleted_and_the_next_child_gets_a_fresh_one(pool: CopyPool, trace: str) -> None:
    first = pool.take()
    TRACES[trace](first)
    assert not pool.give_back(first)
    assert not first.exists()
    second = pool.take()
    assert second != first and _files(second) == _files(pool.pristine)
    assert pool.made == 2


def test_a_copy_whose_child_left_something_running_is_deleted(pool: CopyPool) -> None:
    first = pool.take()
    assert not pool.give_back(first, reusable=False)
    assert not first.exists()


def test_a_change_to_the_pristine_tree_retires_every_copy_made_before_it(pool: CopyPool) -> None:
    idle, lent = pool.take(), pool.take()
    pool.give_back(idle)
    (pool.pristine / "pkg" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"adopted")
    pool.pristine_changed()
    assert not idle.exists()  # idle: deleted at once
    assert not pool.give_back(lent) and not lent.exists()  # lent: deleted when given back, untouched or not
    fresh = pool.take()
    assert _files(fresh) == _files(pool.pristine)
