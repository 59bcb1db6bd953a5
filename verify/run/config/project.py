"""Which files of the project a run works on: the source roots, the gates, the package and conftest files above
a gate and the root's pytest configuration. The private copies hold exactly these and the result cache keys on
them. It knows nothing of pytest, forking or reports.
"""

from __future__ import annotations

from pathlib import Path

from verify.run.config.settings import ProjectConfig

__all__ = ["project_files"]

_ROOT_FILES = ("pyproject.toml", "setup.cfg", "pytest.ini", "tox.ini", "conftest.py")
_SKIP_PARTS = ("__pycache__", ".pytest_cache")


def project_files(config: ProjectConfig) -> list[str]:
    """Files the gates run against, relative to the root: the private copy holds exactly these.

    The source roots and gate paths (a gate file with its whole folder: its sibling helper modules import
    as the folder's conftest puts them on sys.path under plain pytest), the `__init__.py` and `conftest.py`
    files above a gate (they decide how pytest names and imports it) with the modules beside such a conftest
    (importable the same way), and the root's pytest configuration,
    less what `exclude` matches: an excluded file is absent from the copy, so no gate run collects it. The
    same list keys the result cache, so an edit to any of them re-runs the mutations.
    """
    root, found = config.root, set()
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
        candidates = path.rglob("*") if path.is_dir() else [path]
        for file in candidates:
            relative = file.relative_to(root)
            if (
                file.is_file()
                and not file.name.endswith(".pyc")
                and not set(relative.parts) & set(_SKIP_PARTS)
                and kept(relative)
            ):
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
