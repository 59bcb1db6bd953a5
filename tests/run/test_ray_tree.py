"""The pristine project as the Ray executor ships it: one archive named by its contents, unpacked once a node."""

from __future__ import annotations

import os
import time

from verify.config.project import project_files
from verify.config.settings import load_config
from verify.run.execution.cluster import tree


def test_the_archive_is_named_by_its_contents_and_unpacks_to_the_gates_files(toy_copy, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tree.tempfile, "gettempdir", lambda: str(tmp_path / "node"))
    root = toy_copy()
    config = load_config(root)
    digest, archive = tree.pack(config)
    os.utime(root / "toy" / "arith.py", (0, 0))  # an mtime is not content
    assert tree.pack(config)[0] == digest
    assert tree.unpacked(digest, None) is None  # not on this node yet: the caller fetches the archive
    unpacked = tree.unpacked(digest, archive)
    assert unpacked is not None
    assert sorted(p.relative_to(unpacked).as_posix() for p in unpacked.rglob("*") if p.is_file()) == project_files(
        config
    )
    assert (unpacked / "toy" / "arith.py").read_bytes() == (root / "toy" / "arith.py").read_bytes()
    assert tree.unpacked(digest, None) == unpacked  # the next job on this node reuses it
    (root / "toy" / "arith.py").write_text((root / "toy" / "arith.py").read_text() + "# edited\n")
    assert tree.pack(config)[0] != digest


def test_a_node_removes_the_trees_no_job_has_used_for_a_day(toy_copy, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tree.tempfile, "gettempdir", lambda: str(tmp_path / "node"))
    config = load_config(toy_copy())
    digest, archive = tree.pack(config)
    home = tree.where(digest).parent
    home.mkdir(parents=True)
    day_old = time.time() - tree.IDLE_S - 60
    stale, recent, half_done = home / ("a" * 64), home / ("b" * 64), home / ".cccccccccccc-x1"
    for folder in (stale, recent, half_done):
        (folder / "toy").mkdir(parents=True)
        (folder / "toy" / "arith.py").write_text("old revision\n")
    os.utime(stale, (day_old, day_old))
    os.utime(half_done, (day_old, day_old))
    unpacked = tree.unpacked(digest, archive)
    assert unpacked is not None and unpacked.is_dir()
    assert sorted(p.name for p in home.iterdir()) == sorted([recent.name, digest])  # the idle ones are gone
    # A tree in use is touched at every job, so a sibling's prune never takes it.
    os.utime(unpacked, (day_old, day_old))
    tree.touch(digest)
    assert unpacked.stat().st_mtime > day_old + 3600
    os.utime(recent, (day_old, day_old))
    assert tree.unpacked(digest, None) == unpacked  # reusing a tree prunes nothing: only a new unpack does
    assert recent.is_dir()
