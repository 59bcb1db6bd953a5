"""Checking proposals before any is written: each mutant applied to its file's text, parsed, and imported in a
private copy of the project (its Python files copied under a temporary folder; no bytecode is written anywhere),
all in one process of its own. The project's module-level code runs there, under a mutant: that process is
confined as a sweep's mutmut is (`verify.sandbox.launch`: it may write only the temporary folder, with the
harness's secrets out of its environment, and every process it starts ends with it), and the user's tree is
inventoried around it (`verify.sandbox.guard`): a change to it is a `ProbeError`, as is a kernel that refuses the
confinement. Knows the project's layout and the probe; nothing of how proposals are found or written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from verify.config.layout import module_name
from verify.propose.scanner import Proposal
from verify.sandbox import hardening, launch
from verify.sandbox.guard import TreeGuard
from verify.sandbox.private_copy import copy_files, visible_files

__all__ = ["IMPORT_TIMEOUT_S", "ProbeError", "import_failures"]

IMPORT_TIMEOUT_S = 600.0
# The probe by its module, with the interpreter's first path entry (the working directory: the copy) dropped
# first, so a package of the project's named `verify` cannot stand in for the harness's own.
_PROBE = "import sys; sys.path.pop(0); from verify.propose.import_probe import main; main(*sys.argv[1:])"


class ProbeError(Exception):
    """The import probe could not be trusted: the kernel refused to confine it, or the project's files changed
    while it ran. Nothing was written."""


def _mutated(root: Path, proposal: Proposal) -> str:
    text = (root / proposal.file).read_text()
    start = text.index(proposal.anchor)
    return text[:start] + proposal.replacement + text[start + len(proposal.anchor) :]


def import_failures(root: Path, import_paths: Sequence[str], proposals: Sequence[Proposal]) -> dict[int, str]:
    """For each proposal (by its index) that does not apply, parse and import, why. One probe process imports
    every mutant from a private copy of the project's Python files, confined; raises `ProbeError` when it could not
    be, or when the project changed while it ran."""
    failures: dict[int, str] = {}
    items = []
    with tempfile.TemporaryDirectory(prefix="dflash-propose-") as tmp:
        copy = Path(tmp) / "project"
        copy_files(root, [name for name in visible_files(root) if name.endswith(".py")], copy)
        for index, proposal in enumerate(proposals):
            module = module_name(proposal.file, root, import_paths)
            if module is None:
                failures[index] = f"{proposal.file} does not import from the source roots"
                continue
            try:
                text = _mutated(root, proposal)
                compile(text, proposal.file, "exec", dont_inherit=True)
            except (ValueError, SyntaxError) as error:
                failures[index] = f"the mutant does not apply or parse: {error}"
                continue
            items.append({"key": str(index), "module": module, "path": str(copy / proposal.file), "text": text})
        if not items:
            return failures
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        paths = [str((copy / rel).resolve()) for rel in import_paths]
        request.write_text(json.dumps({"paths": paths, "items": items}))
        scratch = Path(tmp) / "tmp"
        scratch.mkdir()
        env = hardening.clean_environment(os.environ)
        env |= {"PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(scratch), launch.WRITABLE: tmp}
        command = [sys.executable, launch.__file__, sys.executable, "-c", _PROBE, str(request), str(result)]
        with TreeGuard(root) as guard:
            start_ns = time.time_ns()
            try:
                done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True,
                                      timeout=IMPORT_TIMEOUT_S, check=False, start_new_session=True)  # fmt: skip
            except subprocess.TimeoutExpired:
                done = None  # the launcher, killed by `run`, takes every process beneath it with it
            guard.record("_import-probe", start_ns, time.time_ns())  # a change then: "while the import-probe child ran"
        if guard.errors:
            raise ProbeError(f"the import probe of the proposals: {'; '.join(guard.errors)}; nothing was written")
        if done is None:
            return {**failures, **{int(item["key"]): "the import probe timed out" for item in items}}
        if why := launch.refused(done.returncode, done.stderr):
            raise ProbeError(f"the kernel refused to confine the import probe of the proposals {why}; nothing was "
                             "imported or written")  # fmt: skip
        if not result.is_file():
            tail = " ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            return {**failures, **{int(item["key"]): f"the import probe failed: {tail}" for item in items}}
        answers = json.loads(result.read_text())
    failures.update({int(key): why for key, why in answers.items() if why})
    return failures
