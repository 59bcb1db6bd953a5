"""What the user's project holds, file by file, and what changed in it: the run's evidence that no child wrote
where it must not, confined or not.

A snapshot stats every entry under the project root, untracked and git-ignored ones included (a virtualenv
inside the project too), and every entry of its git directories (a worktree's own and the common one, less
the folders of other worktrees), without reading a byte: type, mode, size, mtime, ctime, inode and link
count, and a symlink's target. A write, a truncate, a rename, a link, a chmod or a utime moves the ctime,
which no process can set, so a file rewritten to the same size with its old mtime still shows. The git index
alone is compared by what it records (`git ls-files --stage`), since an editor's `git status` rewrites it
with the same entries. Left out: the tool's own cache folder and the report files the run writes.

Each change keeps the time it happened (its ctime, or its folder's for a removal), which is how
`verify.sandbox.guard` names the child that made it. This module knows nothing of children or reports.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import signal
import stat
import subprocess
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

__all__ = ["HOME_FILES", "Change", "Entry", "Snapshot", "diff", "home_paths", "snapshot", "snapshot_aside"]

# The files in a home folder through which code gets run or credentials handed out: shell start-up, ssh,
# git, package indexes, user services and Python's per-user start-up hooks. A home cannot be inventoried
# whole (a browser or a shell writes there all the time); these rarely change, and a change is serious.
HOME_FILES = (
    ".bashrc", ".bash_aliases", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
    ".zprofile", ".config/fish", ".config/environment.d", ".ssh", ".gitconfig", ".config/git", ".git-credentials",
    ".config/gh", ".pypirc", ".netrc", ".pip", ".config/pip", ".pydistutils.cfg", ".condarc", ".npmrc",
    ".local/bin", ".config/autostart", ".config/systemd/user", ".docker/config.json", ".aws", ".kube/config",
)  # fmt: skip

_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "folder", stat.S_IFLNK: "symlink"}
_SHARED = ("config", "hooks", "info", "packed-refs", "refs")  # of a git dir, what every worktree uses


class Entry(NamedTuple):
    """One entry's stat, as compared. A named tuple, not a frozen dataclass: a snapshot makes one per file (a
    virtualenv inside the project is tens of thousands), and a frozen dataclass's construction was a third of the
    walk's time."""

    kind: str
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    links: int
    target: str = ""  # a symlink's target; the git index's recorded entries (a digest)

    def same(self, other: Entry) -> bool:
        """Nothing was done to it. A folder's own times move with its entries, which are compared one by one."""
        if self.kind != other.kind or self.mode != other.mode or self.target != other.target:
            return False
        if self.kind == "folder":
            return self.inode == other.inode
        if self.kind == "index":
            return True
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode, self.links) == (
            other.size, other.mtime_ns, other.ctime_ns, other.inode, other.links,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Snapshot:
    root: Path
    entries: dict[str, Entry]  # relative to root ("a/b.py", ".git/HEAD"); absolute for a git dir elsewhere


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # as in Snapshot.entries
    what: str  # "new", "removed", "changed", "mode changed", "now a folder", ...
    when_ns: int  # wall-clock time the change happened, as the file system recorded it (0: unknown)


def _entry(path: str, st: os.stat_result) -> Entry:
    kind = _KINDS.get(stat.S_IFMT(st.st_mode), "other")
    target = os.readlink(path) if kind == "symlink" else ""
    return Entry(kind, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_nlink, target)


def _walk(top: Path, name: str, skip: Collection[str], entries: dict[str, Entry]) -> None:
    """`top` itself (keyed `name`: "" for the root) and every entry beneath it, keyed `name/...` (links are
    recorded, never followed)."""
    with contextlib.suppress(OSError):
        entries[name] = _entry(str(top), top.lstat())
    stack = [(str(top), name)]
    while stack:
        folder, key = stack.pop()
        try:
            scan = os.scandir(folder)
        except NotADirectoryError:
            continue  # a file walked as a top (`config`): its entry is all there is
        except OSError:
            continue  # unreadable, or gone since its parent was listed: the parent's entry shows that
        with scan:
            for item in scan:
                child = f"{key}/{item.name}" if key else item.name
                if child in skip:
                    continue
                try:
                    entries[child] = _entry(item.path, item.stat(follow_symlinks=False))
                except OSError:
                    continue
                if entries[child].kind == "folder":
                    stack.append((item.path, child))


def git_dirs(root: Path) -> tuple[Path, Path] | None:
    """(this checkout's git dir, the common one): both `root/.git` in a plain checkout, two folders elsewhere
    for a linked worktree (`.git` is then a file naming its own); None outside git."""
    dot = root / ".git"
    if dot.is_dir():
        return dot, dot
    if not dot.is_file() or not (text := dot.read_text(errors="replace").strip()).startswith("gitdir:"):
        return None
    own = (root / text.removeprefix("gitdir:").strip()).resolve()
    common_file = own / "commondir"
    return own, (own / common_file.read_text().strip()).resolve() if common_file.is_file() else own


def _checked_out_elsewhere(own: Path, common: Path) -> set[str]:
    """Refs (`refs/heads/x`) that other checkouts of the repository have checked out: they commit to them."""
    refs = set()
    for head in [common / "HEAD", *common.glob("worktrees/*/HEAD")]:
        if head.parent != own:
            with contextlib.suppress(OSError):
                if (text := head.read_text().strip()).startswith("ref:"):
                    refs.add(text.removeprefix("ref:").strip())
    return refs


def _git_skips(own: Path, common: Path, common_key: str) -> set[str]:
    """What of the git dirs moves without this checkout: other worktrees' folders and branches, and the object
    store and reflogs that every checkout adds to (objects are never rewritten in place)."""
    skip = {f"{common_key}/{name}" for name in ("worktrees", "objects", "logs")}
    return skip | {f"{common_key}/{ref}" for ref in _checked_out_elsewhere(own, common)}


def _index_digest(root: Path) -> str:
    """What the index records (path, mode, blob, stage), not how git last cached file stats in it."""
    try:
        done = subprocess.run(["git", "ls-files", "--stage", "-z"], cwd=root, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return hashlib.sha256(done.stdout).hexdigest() if done.returncode == 0 else ""


def home_paths(home: Path) -> list[Path]:
    """`HOME_FILES` under `home`, with Python's per-user site-packages start-up files (`.pth`, usercustomize)."""
    paths = [home / name for name in HOME_FILES]
    paths += home.glob(".ipython/profile_*/startup")  # IPython runs every file there at start
    for site in home.glob(".local/lib/python*/site-packages"):
        paths += [*site.glob("*.pth"), site / "usercustomize.py", site / "sitecustomize.py"]
    return paths


def snapshot(root: Path, skip: Collection[str] = (), extra: Collection[Path] = ()) -> Snapshot:
    """Every entry under `root` and its git directories, and every path of `extra` (a file, or a folder and
    everything in it, keyed by absolute path); `skip` names entries (relative to root) left out with
    everything beneath them."""
    root = Path(root).resolve()
    entries: dict[str, Entry] = {}
    for path in extra:
        with contextlib.suppress(OSError):
            entries[str(path)] = _entry(str(path), path.lstat())
            if entries[str(path)].kind == "folder":
                _walk(path, str(path), (), entries)
    dirs = git_dirs(root)
    if dirs is not None and dirs[0] == dirs[1] == root / ".git":  # walked with the root, as `.git/...`
        skip = set(skip) | _git_skips(dirs[0], dirs[1], ".git")
    _walk(root, "", skip, entries)
    if dirs is not None and dirs[1] != root / ".git":  # a linked worktree: its own folder and the common one
        own, common = dirs
        # Of the common folder only what all checkouts share: the rest (HEAD, index, ...) is the main checkout's.
        skip_common = _git_skips(own, common, str(common))
        for name in _SHARED:
            _walk(common / name, str(common / name), skip_common, entries)
        _walk(own, str(own), {f"{own}/logs"}, entries)
    index = dirs[0] / "index" if dirs is not None else root / ".git" / "index"
    key = ".git/index" if index.parent == root / ".git" else str(index)
    if key in entries and (digest := _index_digest(root)):
        old = entries[key]
        entries[key] = Entry("index", old.mode, old.size, old.mtime_ns, old.ctime_ns, old.inode, old.links, digest)
    return Snapshot(root, entries)


def snapshot_aside(root: Path, skip: Collection[str] = (), extra: Collection[Path] = ()) -> Callable[[], Snapshot]:
    """`snapshot(root, skip, extra)`, taken by a forked helper while this process goes on (the run's parent
    imports torch meanwhile, and the other core walks the project); the function returned waits for it. A
    helper that gives nothing back (killed, out of memory) is replaced by a snapshot taken then, here: until
    the run's first child starts nothing of the run writes in the project, so it stands for the same moment."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: never returns into the caller's code
        code = 1
        try:
            os.close(read)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is its parent's to act on
            taken = snapshot(root, skip, extra)
            rows = {key: (e.kind, e.mode, e.size, e.mtime_ns, e.ctime_ns, e.inode, e.links, e.target)
                    for key, e in taken.entries.items()}  # fmt: skip
            with os.fdopen(write, "wb") as answer:
                answer.write(marshal.dumps((str(taken.root), rows)))  # plain tuples: ~10x faster than pickling
            code = 0
        finally:
            os._exit(code)
    os.close(write)

    @functools.cache
    def result() -> Snapshot:
        with os.fdopen(read, "rb") as answer:
            data = answer.read()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        try:
            taken_root, rows = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            return snapshot(root, skip, extra)
        return Snapshot(Path(taken_root), {key: Entry(*row) for key, row in rows.items()})

    return result


def _what(old: Entry, new: Entry) -> str:
    if old.kind != new.kind and {old.kind, new.kind} != {"file", "index"}:
        return f"{old.kind} now a {new.kind}"
    if old.target != new.target:
        return "retargeted" if new.kind == "symlink" else "changed"
    if old.kind == "folder":
        return "replaced" if old.inode != new.inode else "mode changed"
    if old.mode != new.mode and (old.size, old.mtime_ns) == (new.size, new.mtime_ns):
        return "mode changed"
    if old.inode != new.inode:
        return "replaced"
    if old.links != new.links:
        return "hard-linked" if new.links > old.links else "unlinked elsewhere"
    return "changed"


def diff(before: Snapshot, after: Snapshot) -> list[Change]:
    """Every entry added, removed or changed, in path order, each with when it happened."""
    changes: list[Change] = []
    old, new = before.entries, after.entries
    for path in sorted(set(old) | set(new)):
        if path not in new:
            parent = new.get(path.rpartition("/")[0])  # a removal moves its folder's ctime
            changes.append(Change(path, "removed", parent.ctime_ns if parent else 0))
        elif path not in old:
            changes.append(Change(path, "new", new[path].ctime_ns))
        elif not old[path].same(new[path]):
            changes.append(Change(path, _what(old[path], new[path]), new[path].ctime_ns))
    return changes
