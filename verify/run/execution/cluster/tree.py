"""The pristine project as one content-addressed archive: built once by the driver, unpacked once per node.

No filesystem is shared between the driver and the workers: the files the gates run against
(`project_files`) travel as a tar archive in Ray's object store, named by the digest of their paths and
bytes. A node unpacks a digest once into its temp folder (atomically: a half-unpacked tree is never seen by
a sibling worker) and every later job there reuses it. Every use touches the tree; a node that unpacks a new
tree removes the ones no job has used for a day (and unpacks a crash left half-done), so a long-lived cluster
does not keep every revision it ever ran. Knows nothing of Ray or jobs.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from verify.config.project import project_files
from verify.config.settings import ProjectConfig

__all__ = ["pack", "touch", "unpacked"]

_HOME = "dflash-verify-trees"
# A tree no job has touched for this long belongs to a revision no run is using: a run touches its tree at every
# job, and no run goes a day between two jobs.
IDLE_S = 24 * 3600.0


def pack(config: ProjectConfig) -> tuple[str, bytes]:
    """(digest, archive) of the project's files: same files, same digest, whatever their mtimes or owners."""
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for rel in project_files(config):
            data = (config.root / rel).read_bytes()
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
            info = tarfile.TarInfo(rel)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return digest.hexdigest(), buffer.getvalue()


def where(digest: str) -> Path:
    return Path(tempfile.gettempdir(), _HOME, digest)


def unpacked(digest: str, archive: bytes | None) -> Path | None:
    """The tree of `digest` on this node; unpacked from `archive` when not there yet (None: not there and no
    archive given, so the caller fetches it)."""
    tree = where(digest)
    if tree.is_dir():
        touch(digest)
        return tree
    if archive is None:
        return None
    tree.parent.mkdir(parents=True, exist_ok=True)
    _prune(tree.parent, time.time() - IDLE_S)
    aside = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=tree.parent))
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as opened:
        opened.extractall(aside, filter="data")  # no absolute paths, no links out of the tree
    try:
        os.rename(aside, tree)
    except OSError:  # a sibling worker unpacked it first: theirs is the same bytes
        shutil.rmtree(aside, ignore_errors=True)
    return tree


def touch(digest: str) -> None:
    """Mark the tree of `digest` used now (every use of it, a server reusing it between jobs included)."""
    try:
        os.utime(where(digest))
    except OSError:  # pruned by a sibling a moment ago: the caller's next use unpacks it again
        pass


def _prune(home: Path, before: float) -> None:
    """Remove the trees (and half-done unpacks) under `home` last used before `before`."""
    for entry in home.iterdir():
        try:
            idle = entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < before
        except OSError:
            continue
        if idle:
            shutil.rmtree(entry, ignore_errors=True)
