"""Which files of the project a run works on: the source roots, the gates, the package and conftest files above
a gate and the root's pytest configuration, less what the run itself writes there (its cache, its reports, a
temp folder inside the project that holds its private copies) and what no gate runs against (git's folder, a
virtualenv), whatever the source roots (`["."]` names the whole project). The private copies hold exactly these
and the result cache keys on them. It knows nothing of pytest, forking or reports.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Iterator
from pathlib import Path

from verify.config.settings import ProjectConfig

__all__ = ["CACHE_DIR", "project_files", "run_writes"]

CACHE_DIR = ".dflash-cache"  # the result cache and the last report: the one folder the run writes in the project
_ROOT_FILES = ("pyproject.toml", "setup.cfg", "pytest.ini", "tox.ini", "conftest.py")
_SKIP_PARTS = ("__pycache__", ".pytest_cache", ".git")
_VIRTUALENV = "pyvenv.cfg"  # the file that makes a folder a virtualenv (PEP 405)


def run_writes(root: Path, outputs: Collection[Path] = ()) -> set[str]:
    """What a run writes inside the project, relative to its root: the cache folder, each report file in
    `outputs` that lies inside it, and the temp folder (the private copies) when TMPDIR points inside it."""
    root = Path(root).resolve()
    own = {CACHE_DIR}
    for path in (*outputs, Path(tempfile.gettempdir())):
        resolved = Path(path).resolve()
        if resolved.is_relative_to(root) and resolved != root:
            own.add(resolved.relative_to(root).as_posix())
    return own


def _files_under(root: Path, top: Path, left_out: set[str]) -> Iterator[Path]:
    """Every file under `top` (or `top` itself), less the folders and files `left_out` names (relative to
    `root`), caches, git's folder and virtualenvs, none of which is walked."""
    if top.is_file():
        yield top
        return
    for folder, folders, files in os.walk(top, followlinks=True):  # as rglob did: a linked folder is walked
        here = Path(folder)
        folders[:] = [
            name for name in folders
            if name not in _SKIP_PARTS and (here / name).relative_to(root).as_posix() not in left_out
            and not (here / name / _VIRTUALENV).is_file()
        ]  # fmt: skip
        yield from (here / name for name in files if (here / name).relative_to(root).as_posix() not in left_out)


def project_files(config: ProjectConfig, outputs: Collection[Path] = ()) -> list[str]:
    """Files the gates run against, relative to the root: the private copy holds exactly these.

    The source roots and gate paths (a gate file with its whole folder: its sibling helper modules import
    as the folder's conftest puts them on sys.path under plain pytest), the `__init__.py` and `conftest.py`
    files above a gate (they decide how pytest names and imports it) with the modules beside such a conftest
    (importable the same way), and the root's pytest configuration,
    less what `exclude` matches: an excluded file is absent from the copy, so no gate run collects it. The
    same list keys the result cache, so an edit to any of them re-runs the mutations. What the run writes
    (`run_writes`: the cache, the report files `outputs`, a temp folder inside the project) is never in it, so a
    run's own writes neither change the tree it checks nor stop the next run from reusing the cache.
    """
    root, found = config.root, set()
    left_out = run_writes(root, outputs)
    excluded = {path for matched in config.excluded().values() for path in matched}

    def kept(relative: Path) -> bool:
        return not any(part.as_posix() in excluded for part in (relative, *relative.parents))

    # A gate file at the root brings the root's own modules only, never the whole tree (environments, .git).
    siblings = [f.name for rel in config.gates if "/" not in rel and (root / rel).is_file() for f in root.glob("*.py")]
    gate_folders = [
        Path(rel).parent.as_posix() if "/" in rel and (root / rel).is_file() else rel for rel in config.gates
    ]
    for rel in (*config.source_roots, *gate_folders, *siblings):
        path = root / rel
        if not path.exists() or Path(rel).as_posix() in left_out:
            continue
        for file in _files_under(root, path, left_out):
            relative = file.relative_to(root)
            if not file.name.endswith(".pyc") and not set(relative.parts) & set(_SKIP_PARTS) and kept(relative):
                found.add(relative.as_posix())
        for parent in Path(rel).parents:
            found.update(
                (parent / m).as_posix() for m in ("__init__.py", "conftest.py") if (root / parent / m).is_file()
            )
            if parent.parts and (root / parent / "conftest.py").is_file():
                # pytest puts a conftest's folder on sys.path (outside a package): the modules beside it import.
                found.update(
                    f.relative_to(root).as_posix() for f in (root / parent).glob("*.py") if kept(f.relative_to(root))
                )
    found.update(name for name in _ROOT_FILES if (root / name).is_file())
    return sorted(found)
