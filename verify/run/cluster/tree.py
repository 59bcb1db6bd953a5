"""The pristine project as one content-addressed archive: built once by the driver, unpacked once per node.

No filesystem is shared between the driver and the workers: the files the gates run against
(`project_files`) travel as a tar archive in Ray's object store, named by the digest of their paths and
bytes. A node unpacks a digest once into its temp folder (atomically: a half-unpacked tree is never seen by
a sibling worker) and every later job there reuses it. Knows nothing of Ray or jobs.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from verify.run.settings import ProjectConfig, project_files

__all__ = ["pack", "unpacked"]

_HOME = "dflash-verify-trees"


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
        return tree
    if archive is None:
        return None
    tree.parent.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=tree.parent))
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as opened:
        opened.extractall(aside, filter="data")  # no absolute paths, no links out of the tree
    try:
        os.rename(aside, tree)
    except OSError:  # a sibling worker unpacked it first: theirs is the same bytes
        shutil.rmtree(aside, ignore_errors=True)
    return tree
