"""The result cache under `.dflash-cache/` and the `--changed-since` file set.

An entry is keyed by a hash of the mutation record, every project file the gates run against
(`project_files`), the run settings that can change a verdict and the interpreter that reached it (Python's
major.minor, the versions of torch and of every preloaded package), so an unchanged mutation against an
unchanged tree under the same interpreter is never re-run, and any edit, or another Python or torch, re-runs
it. `.dflash-cache/` is the only thing the engine writes into the user's tree. This module knows nothing of
forking or pytest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from verify.config.project import CACHE_DIR, project_files
from verify.config.settings import ProjectConfig
from verify.mutation import Mutation
from verify.report.decode import result_from_dict
from verify.report.verdict import MutationResult
from verify.run.harness_digest import harness_digest_bytes
from verify.run.phases.corroboration import may_replay

__all__ = [
    "CACHE_DIR",
    "ChangedSinceError",
    "ResultCache",
    "changed_files",
    "interpreter_facts",
    "package_version",
    "python_version",
    "setup_digest",
    "tree_changes",
    "tree_digest",
    "tree_files",
]

# Bump when an entry's meaning changes, to orphan old entries. 3: each outcome says how its red was corroborated
# (`GateOutcome.corroboration`), where 2 said it in message prefixes and exception-type strings.
_FORMAT = "dflash-cache/3"


class ChangedSinceError(Exception):
    """`--changed-since REV` could not be resolved by git (CLI exit code 2)."""


# Versioned whether preloaded or not: the engines this harness verifies are torch engines, and their gates run
# torch's kernels (another torch can round differently, or fix a bug a gate relied on).
_ALWAYS_VERSIONED = ("torch",)


def python_version() -> str:
    """major.minor: a patch release changes no semantics a gate can see; a minor one can (and its stdlib)."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def package_version(module: str) -> str:
    """The installed version of the distribution(s) providing `module`'s top-level package; "" when none does (a
    module of the project's own, whose files the tree digest already holds, or one not installed)."""
    top = module.partition(".")[0]
    try:
        return metadata.version(top)
    except metadata.PackageNotFoundError:
        pass
    names = sorted(set(metadata.packages_distributions().get(top, ())))  # e.g. `yaml` is PyYAML's
    return ",".join(f"{name}=={metadata.version(name)}" for name in names)


def interpreter_facts(config: ProjectConfig) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What of the interpreter beside the tree decides a gate's result: Python's major.minor and the versions of
    torch and of every preloaded module's package (the code the gates call into, imported once in the parent)."""
    tops = {module.partition(".")[0] for module in (*_ALWAYS_VERSIONED, *config.preload)}
    # The standard library's modules go with Python's version.
    return python_version(), tuple((top, package_version(top)) for top in sorted(tops - sys.stdlib_module_names))


def tree_files(config: ProjectConfig, outputs: Collection[Path] = ()) -> dict[str, bytes]:
    """The sha256 of every file the gates run against, by its path relative to the root; `outputs` are the run's
    report files, never among them."""
    return {rel: hashlib.sha256((config.root / rel).read_bytes()).digest() for rel in project_files(config, outputs)}


def tree_changes(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> list[str]:
    """Every file of `tree_files` added, removed or changed between two readings, each with what happened."""
    return [
        f"{rel} ({'new' if rel not in before else 'removed' if rel not in after else 'changed'})"
        for rel in sorted(set(before) | set(after))
        if before.get(rel) != after.get(rel)
    ]


def _setup_bytes(config: ProjectConfig) -> bytes:
    settings = (config.gates, config.gate_marker, config.source_roots, config.invariant_errors, config.timeout_factor,
                config.timeout_min_s, config.exclude, config.pytest_args, config.statistical_gates,
                config.conclusive_p_value)  # fmt: skip
    return _FORMAT.encode() + harness_digest_bytes() + repr((settings, interpreter_facts(config))).encode()


def setup_digest(config: ProjectConfig) -> str:
    """`tree_digest` less the files: two trees with one setup differ only in what their files say, so an
    earlier tree's baseline can stand for a later one's (`verify.run.phases.reuse`)."""
    return hashlib.sha256(_setup_bytes(config)).hexdigest()


def tree_digest(config: ProjectConfig, outputs: Collection[Path] = (), files: Mapping[str, bytes] | None = None) -> str:
    """sha256 over the path and bytes of every file the gates run against (`files`, read now when not given),
    plus the run settings and the interpreter's facts (a cache written under one Python or torch is never
    replayed under another)."""
    digest = hashlib.sha256(_setup_bytes(config))
    for rel, content in (tree_files(config, outputs) if files is None else files).items():
        digest.update(rel.encode() + b"\0")
        digest.update(content)
    return digest.hexdigest()


class ResultCache:
    def __init__(self, root: Path, enabled: bool = True) -> None:
        self.directory = Path(root) / CACHE_DIR
        self.enabled = enabled

    @staticmethod
    def key(tree: str, mutation: Mutation, all_gates: bool, first_kill: bool = False) -> str:
        """A first-kill result is keyed apart: it answers a first-kill run, never a full-matrix one (whose
        result, a superset, may answer both)."""
        record = json.dumps(dataclasses.asdict(mutation), sort_keys=True)
        mode = "\0first-kill" if first_kill else ""
        return hashlib.sha256(f"{tree}\0{record}\0{all_gates}{mode}".encode()).hexdigest()

    def _read(self, name: str) -> dict[str, Any] | None:
        path = self.directory / f"{name}.json"
        if not self.enabled or not path.is_file():
            return None
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None  # a torn or foreign entry is a miss, never an error
        return data

    def _write(self, name: str, data: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.directory.mkdir(exist_ok=True)
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")  # keeps the cache out of git in any project, not just ours
        tmp = self.directory / f"{name}.tmp"
        tmp.write_text(json.dumps(data))
        tmp.replace(self.directory / f"{name}.json")

    def get(self, key: str) -> MutationResult | None:
        data = self._read(key)
        try:
            result = result_from_dict(data) if data else None
        except (KeyError, ValueError, TypeError):
            return None  # a foreign entry is a miss
        if result is None or not may_replay(result.status):
            return None  # crashes, timeouts and errors are never replayed
        return dataclasses.replace(result, cached=True)

    def put(self, key: str, result: MutationResult) -> None:
        """Store a verdict the corroboration policy called final (`Policy.recorded`); others are refused here too."""
        if may_replay(result.status):
            self._write(key, dataclasses.asdict(result))

    def forget(self, key: str) -> None:
        """Drop a verdict found untrustworthy after it was cached (its mutant changed the user's files)."""
        (self.directory / f"{key}.json").unlink(missing_ok=True)

    def get_gate_checks(self, tree: str, reruns: int) -> dict[str, str]:
        """The gates this tree's flake checks settled for a run of `reruns` re-runs: {gate id: "" when green on
        at least that many re-runs, else why not (a red finding stands however few re-runs found it)}."""
        checks = (self._read(f"gatechecks-{tree}") or {}).get("gates", {})
        if not isinstance(checks, dict):
            return {}
        settled = {}
        for gate_id, entry in checks.items():
            why, count = entry if isinstance(entry, list) and len(entry) == 2 else (entry, 0)
            if str(why) or (isinstance(count, int) and count >= reruns):
                settled[str(gate_id)] = str(why)
        return settled

    def put_gate_checks(self, tree: str, checks: dict[str, str], reruns: int) -> None:
        """Record what `reruns` re-runs found; a gate's entry keeps the most green re-runs any check gave it."""
        known = (self._read(f"gatechecks-{tree}") or {}).get("gates", {})
        known = known if isinstance(known, dict) else {}
        for gate_id, why in checks.items():
            old = known.get(gate_id)
            count = old[1] if isinstance(old, list) and len(old) == 2 and isinstance(old[1], int) else 0
            known[gate_id] = [why, max(count, reruns) if not why else reruns]
        self._write(f"gatechecks-{tree}", {"gates": known})

    def get_self_check(self, tree: str) -> bool:
        return bool((self._read(f"selfcheck-{tree}") or {}).get("passed"))

    def put_self_check(self, tree: str) -> None:
        self._write(f"selfcheck-{tree}", {"passed": True})

    def clear(self) -> int:
        """Remove every entry; returns how many files went. Only the cache folder is touched."""
        if not self.directory.is_dir():
            return 0
        files = [p for p in self.directory.iterdir() if p.is_file()]
        shutil.rmtree(self.directory)
        return len(files)

    @property
    def last_report(self) -> Path:
        """Where a run keeps its report as results arrive (partial while it runs, whole when it ends)."""
        return self.directory / "last-report.json"

    def get_baseline(self, tree: str) -> dict[str, Any] | None:
        return self._read(f"baseline-{tree}")

    def put_baseline(self, tree: str, data: dict[str, Any]) -> None:
        self._write(f"baseline-{tree}", data)

    def earlier_baselines(self, setup: str, limit: int = 3) -> Iterator[dict[str, Any]]:
        """Cached baselines of other trees under the setup `setup` (`setup_digest`), newest first; at most
        `limit` are read (a large suite's entry is megabytes)."""
        if not self.enabled or not self.directory.is_dir():
            return
        found = sorted(self.directory.glob("baseline-*.json"), key=_mtime, reverse=True)
        for path in found[:limit]:
            data = self._read(path.stem)
            if data is not None and data.get("setup") == setup:
                yield data


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0  # removed meanwhile (another run cleared the cache): read as a miss


def _commit(root: Path, rev: str) -> str:
    """The commit `rev` names, resolved so that no user string ever reaches git as an option."""
    if not rev or rev.startswith("-"):
        raise ChangedSinceError(f"--changed-since: {rev!r} is not a revision")
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
            cwd=root, capture_output=True, text=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise ChangedSinceError("git is not installed") from None
    if done.returncode != 0:
        raise ChangedSinceError(f"--changed-since: unknown revision {rev!r}, or {root} is not a git repository")
    return done.stdout.strip()


def changed_files(root: Path, rev: str) -> set[str]:
    """Paths (relative to the root) that differ between `rev` and the working tree, or are untracked."""
    commit = _commit(root, rev)
    commands = (
        ["git", "diff", "--name-only", "--relative", commit, "--"],
        ["git", "ls-files", "--others", "--exclude-standard"],
    )
    found: set[str] = set()
    for command in commands:
        try:
            done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise ChangedSinceError("git is not installed") from None
        if done.returncode != 0:
            raise ChangedSinceError(f"git cannot diff against {rev!r}: {done.stderr.strip()}")
        found.update(line.strip() for line in done.stdout.splitlines() if line.strip())
    return found  # both commands print paths relative to the root (--relative), not the repo top
