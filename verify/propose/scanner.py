"""The scanner: every rule of every bug class run over one file's syntax tree, each edit turned into a proposal with
an anchor that occurs once in the file (its lines, widened upwards until unique), the mutated file parsed, and a
proposal that changes nothing dropped. Knows source text and the rules; nothing of imports or of the catalog file.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from verify.mutation.apply import count_matches
from verify.propose import attention_rules, distribution_rules, sampling_rules
from verify.propose.edit import BugClass, Edit, Found, Refusal, statement_of
from verify.propose.source import Source, parse_file

__all__ = ["RULES", "Proposal", "Refused", "scan_text"]

Rule = Callable[[Source, dict[ast.AST, ast.stmt], bool], list[Found]]

RULES: dict[BugClass, tuple[Rule, ...]] = {
    BugClass.RATIO: (sampling_rules.ratio,),
    BugClass.RESIDUAL: (sampling_rules.residual,),
    BugClass.ACCEPTANCE: (sampling_rules.acceptance,),
    BugClass.BONUS: (sampling_rules.bonus,),
    BugClass.POSITIONS: (attention_rules.positions,),
    BugClass.CACHE: (attention_rules.crop, attention_rules.cache),
    BugClass.MASK: (attention_rules.mask,),
    BugClass.SOFTMAX: (distribution_rules.softmax,),
    BugClass.TEMPERATURE: (distribution_rules.temperature,),
    BugClass.FILTERS: (distribution_rules.filters,),
}
_MAX_WIDEN = 4  # lines an anchor may grow upwards to become unique


@dataclass(frozen=True, slots=True)
class Proposal:
    """One mutation the scanner proposes: replace `anchor` (once in `file`) with `replacement`."""

    bug_class: BugClass
    file: str  # posix, relative to the project root
    line: int  # the first changed line, 1-based
    anchor: str
    replacement: str
    what: str  # the bug in a line

    @property
    def changed_line(self) -> str:
        """The first line that differs, as the mutant reads it."""
        pairs = zip(self.anchor.split("\n"), self.replacement.split("\n"), strict=False)
        return next((new.strip() for old, new in pairs if old != new), self.replacement.split("\n")[0].strip())


@dataclass(frozen=True, slots=True)
class Refused:
    """A construct of a bug class left unproposed, and why."""

    bug_class: BugClass
    file: str
    line: int
    reason: str


def _anchor(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The character range of the anchor around [start, end): whole lines (from the first one's first non-blank
    character), widened upwards until the text occurs once in the file."""
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    last = len(text) if last == -1 else last
    begin = first + len(text[first:last]) - len(text[first:last].lstrip())
    for _ in range(_MAX_WIDEN + 1):
        if text[begin:last].strip() and count_matches(text, text[begin:last]) == 1:
            return begin, last
        if first == 0:
            return None
        first = text.rfind("\n", 0, first - 1) + 1
        begin = first + len(text[first:last]) - len(text[first:last].lstrip())
    return None


def _proposal(src: Source, file: str, edit: Edit, original_dump: str) -> Proposal | Refused:
    start, end = src.span(edit.node)
    line = src.text.count("\n", 0, start) + 1
    mutated = src.text[:start] + edit.text + src.text[end:]
    try:
        mutated_dump = ast.dump(ast.parse(mutated))
    except SyntaxError as error:
        return Refused(edit.bug_class, file, line, f"the mutant does not parse: {error.msg}")
    if mutated_dump == original_dump:
        return Refused(edit.bug_class, file, line, "the mutant changes nothing (the same syntax tree)")
    found = _anchor(src.text, start, end)
    if found is None:
        return Refused(edit.bug_class, file, line, "no anchor of a few lines around it occurs once in the file")
    begin, last = found
    grown = len(edit.text) - (end - start)
    anchor, replacement = src.text[begin:last], mutated[begin : last + grown]
    return Proposal(edit.bug_class, file, line, anchor, replacement, edit.what)


def scan_text(
    text: str, file: str, classes: tuple[BugClass, ...] = tuple(BugClass)
) -> tuple[list[Proposal], list[Refused]]:
    """Proposals and refusals for one file's text (`file`: its posix path, as the proposals will name it). A file
    that does not parse is one refusal."""
    try:
        src = parse_file(text, file)
    except SyntaxError as error:
        return [], [Refused(classes[0], file, error.lineno or 0, f"the file does not parse: {error.msg}")]
    owners, original_dump = statement_of(src.tree), ast.dump(src.tree)
    proposals: list[Proposal] = []
    refused: list[Refused] = []
    seen: set[tuple[str, str]] = set()
    for bug_class in classes:
        for rule in RULES[bug_class]:
            for found in rule(src, owners, True):
                if isinstance(found, Refusal):
                    refused.append(Refused(bug_class, file, src.line(found.node), found.reason))
                    continue
                made = _proposal(src, file, found, original_dump)
                if isinstance(made, Refused):
                    refused.append(made)
                elif (made.anchor, made.replacement) not in seen:
                    seen.add((made.anchor, made.replacement))
                    proposals.append(made)
    return proposals, refused
