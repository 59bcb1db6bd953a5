"""The inventory of the user's project: every way a file can be touched shows as a change, and what an editor's
`git status` does to the index does not. Plus the `writable` key, which may never open the project itself."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from verify.config.settings import ConfigError, ProjectConfig
from verify.config.writable import writable_paths
from verify.sandbox.inventory import diff, home_paths, snapshot


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (root / "notes.txt").write_text("mine\n")
    (root / ".dflash-cache").mkdir()
    return root


def _rewrite_keeping_mtime(path: Path) -> None:
    before = path.stat()
    path.write_text("y = 1\n")  # same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize(
    ("touch", "expected"),
    [
        (lambda r: (r / "new.txt").write_text("x"), [("new.txt", "new")]),
        (lambda r: (r / "notes.txt").unlink(), [("notes.txt", "removed")]),
        (lambda r: _rewrite_keeping_mtime(r / "pkg" / "a.py"), [("pkg/a.py", "changed")]),
        (lambda r: os.chmod(r / "notes.txt", 0o600), [("notes.txt", "mode changed")]),
        (lambda r: os.link(r / "notes.txt", r.parent / "elsewhere"), [("notes.txt", "hard-linked")]),
        (lambda r: os.rename(r / "notes.txt", r / "pkg" / "n.txt"), [("notes.txt", "removed"), ("pkg/n.txt", "new")]),
        (lambda r: os.utime(r / "notes.txt", (0, 0)), [("notes.txt", "changed")]),
        (lambda r: (r / ".dflash-cache" / "entry.json").write_text("{}"), []),  # the tool's own cache
    ],
    ids=["create", "unlink", "same-size-same-mtime", "chmod", "hard-link", "rename", "utime", "own-cache"],
)
def test_every_touch_is_a_change_with_its_time(tree: Path, touch, expected) -> None:
    before = snapshot(tree, {".dflash-cache"})
    touch(tree)
    changes = diff(before, snapshot(tree, {".dflash-cache"}))
    assert [(c.path, c.what) for c in changes] == expected
    assert all(c.when_ns > 0 for c in changes)


def test_a_git_status_rewriting_the_index_is_no_change_and_a_ref_is(tree: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True)

    git("init", "-q")
    git("add", "pkg/a.py")
    before = snapshot(tree, {".dflash-cache"})
    index = (tree / ".git" / "index").stat()
    os.utime(tree / "pkg" / "a.py", ns=(1, 1))  # stale stat data: git status refreshes and rewrites the index
    git("status", "--porcelain")
    assert (tree / ".git" / "index").stat().st_ino != index.st_ino  # rewritten, with the same entries
    assert [(c.path, c.what) for c in diff(before, snapshot(tree, {".dflash-cache"}))] == [("pkg/a.py", "changed")]
    (tree / ".git" / "refs" / "heads" / "evil").write_text("0" * 40 + "\n")
    assert ".git/refs/heads/evil" in {c.path for c in diff(before, snapshot(tree, {".dflash-cache"}))}


@pytest.mark.parametrize("where", ["inside", "holds"])
def test_writable_may_not_open_the_project(tmp_path: Path, where: str) -> None:
    root = tmp_path / "p"
    root.mkdir()
    path = root / "cache" if where == "inside" else tmp_path
    with pytest.raises(ConfigError, match="holds or lies inside the project"):
        ProjectConfig(root=root, writable=(str(path),))
    with pytest.raises(ConfigError, match="absolute"):
        ProjectConfig(root=root, writable=("relative/dir",))
    assert writable_paths(ProjectConfig(root=root, writable=("~/.cache/x",)).writable)[0].is_absolute()


def test_writable_may_not_open_the_folder_of_the_private_copies(tmp_path: Path, monkeypatch) -> None:
    # The pristine copy and every child's folder live under the temp folder: a writable path holding it would
    # let a mutant rewrite the gates other mutants run (`writable = ["/tmp"]` is the likely slip).
    root, shared = tmp_path / "p", tmp_path / "shared"
    root.mkdir()
    (shared / "tmp").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(shared / "tmp"))
    for path in (shared, shared / "tmp"):
        with pytest.raises(ConfigError, match="holds the temp folder"):
            ProjectConfig(root=root, writable=(str(path),))
    ProjectConfig(root=root, writable=(str(shared / "torchinductor"),))  # a sibling of it is the user's choice


def test_the_homes_start_up_and_credential_files_are_inventoried(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for name in (".bash_aliases", ".git-credentials", ".config/gh/hosts.yml", ".ipython/profile_default/startup/a.py"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("the user's\n")
    root = tmp_path / "p"
    root.mkdir()
    before = snapshot(root, (), home_paths(home))
    for name in (".bash_aliases", ".git-credentials", ".config/gh/hosts.yml", ".ipython/profile_default/startup/a.py"):
        (home / name).write_text("a mutant's\n")
    changed = {Path(c.path).relative_to(home).as_posix() for c in diff(before, snapshot(root, (), home_paths(home)))}
    assert changed >= {".bash_aliases", ".git-credentials", ".config/gh/hosts.yml",
                       ".ipython/profile_default/startup/a.py"}  # fmt: skip


def test_an_inventory_taken_aside_equals_one_taken_here(tree: Path) -> None:
    from verify.sandbox.inventory import snapshot_aside

    result = snapshot_aside(tree, {".dflash-cache"})
    assert result().entries == snapshot(tree, {".dflash-cache"}).entries
    assert result() is result()  # waited for once


def test_a_helper_that_gives_nothing_back_is_replaced_by_an_inventory_taken_here(tree: Path, monkeypatch) -> None:
    import verify.sandbox.inventory as inventory

    def dies(data: object) -> bytes:
        raise MemoryError  # in the helper, before it writes a byte

    monkeypatch.setattr(inventory.marshal, "dumps", dies)
    result = inventory.snapshot_aside(tree)
    (tree / "notes.txt").write_text("changed before the wait\n")
    assert result().entries == snapshot(tree).entries  # taken at the wait, the change included
