"""The proposed catalog: proposals named (`<bug class>-<file stem>-<line>`) and written as a Python catalog module
in the same form as a hand-written one (`register(Mutation(...), ...)`), which `[tool.dflash] mutation_modules` can
name. A file it wrote before is replaced; any other file of that name is refused, never overwritten. Knows the
proposal record and text; nothing of scanning or importing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from verify.propose.scanner import Proposal

__all__ = ["HEADER", "WriterError", "catalog_text", "names", "write_catalog"]

HEADER = '"""Mutations proposed by `dflash mutations propose`'


class WriterError(Exception):
    """The catalog file cannot be written: a file of the user's has its name, or the name is not a module's."""


def names(proposals: Sequence[Proposal]) -> list[str]:
    """A kebab-case name per proposal, unique: its class, its file's stem and its line (-b, -c for a second)."""
    made: list[str] = []
    for proposal in proposals:
        stem = re.sub(r"[^a-z0-9]+", "-", PurePosixPath(proposal.file).stem.lower()).strip("-") or "module"
        base = f"{proposal.bug_class.value}-{stem}-{proposal.line}"
        name, suffix = base, ord("b")
        while name in made:
            name, suffix = f"{base}-{chr(suffix)}", suffix + 1
        made.append(name)
    return made


def _literal(text: str) -> str:
    """A double-quoted Python string literal (JSON's escapes are Python's), as hand-written catalogs spell them."""
    return json.dumps(text, ensure_ascii=False)


def catalog_text(proposals: Sequence[Proposal], roots: Sequence[str]) -> str:
    lines = [
        f"{HEADER} from the source of {', '.join(roots)}: each a bug of a class",
        "speculative decoding is known for, applied, parsed and imported before it was written. Keep those your gates",
        "must catch, delete the others, or move them to a catalog of your own: this file is replaced on the next",
        'run of the command."""',
        "",
        "from verify import Mutation, register",
        "",
        "register(",
    ]
    for name, proposal in zip(names(proposals), proposals, strict=True):
        lines += [
            "    Mutation(",
            f"        name={_literal(name)},",
            f"        bug_class={_literal(f'{proposal.what} ({proposal.file}:{proposal.line})')},",
            f"        file={_literal(proposal.file)},",
            f"        anchor={_literal(proposal.anchor)},",
            f"        replacement={_literal(proposal.replacement)},",
            "    ),",
        ]
    lines.append(")")
    return "\n".join(lines) + "\n"


def write_catalog(root: Path, output: str, text: str) -> Path:
    """Write `text` to `root/output` (a .py file at or below the root) and return its path."""
    path = Path(root) / output
    if path.suffix != ".py" or not path.stem.isidentifier() or PurePosixPath(output).is_absolute() or ".." in output:
        raise WriterError(
            f"--output {output!r} must name a Python module inside the project, e.g. proposed_mutations.py"
        )
    if path.exists() and not path.read_text().startswith(HEADER):
        raise WriterError(
            f"not overwriting {output}: it was not written by `dflash mutations propose`; name another --output"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
