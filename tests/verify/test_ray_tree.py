"""The pristine project as the Ray executor ships it: one archive named by its contents, unpacked once a node."""

from __future__ import annotations

import os

from verify.run.cluster import tree
from verify.run.settings import load_config, project_files


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
