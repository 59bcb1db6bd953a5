"""Checking proposals before any is written: each mutant applied to its file's text, parsed, and imported in a
private copy of the project (its Python files copied under a temporary folder; the user's tree is only read, and
no bytecode is written anywhere), all in one process of its own. Knows the project's layout and the probe;
nothing of how proposals are found or written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from verify.config.layout import module_name
from verify.propose.scanner import Proposal
from verify.sandbox.private_copy import copy_files, visible_files

__all__ = ["IMPORT_TIMEOUT_S", "import_failures"]

IMPORT_TIMEOUT_S = 600.0


def _mutated(root: Path, proposal: Proposal) -> str:
    text = (root / proposal.file).read_text()
    start = text.index(proposal.anchor)
    return text[:start] + proposal.replacement + text[start + len(proposal.anchor) :]


def import_failures(root: Path, import_paths: Sequence[str], proposals: Sequence[Proposal]) -> dict[int, str]:
    """For each proposal (by its index) that does not apply, parse and import, why. One probe process imports
    every mutant from a private copy of the project's Python files."""
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
        request.write_text(json.dumps(items))
        paths = [str((copy / rel).resolve()) for rel in import_paths]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.pathsep.join(paths))
        command = [sys.executable, "-m", "verify.propose.import_probe", str(request), str(result)]
        try:
            done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True,
                                  timeout=IMPORT_TIMEOUT_S, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {**failures, **{int(item["key"]): "the import probe timed out" for item in items}}
        if not result.is_file():
            tail = " ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            return {**failures, **{int(item["key"]): f"the import probe failed: {tail}" for item in items}}
        answers = json.loads(result.read_text())
    failures.update({int(key): why for key, why in answers.items() if why})
    return failures
