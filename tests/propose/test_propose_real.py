"""`dflash mutations propose` on real code: this repository's runner (the proposals measured against the existing
catalog's entries in the bug classes the scanner covers) and the lookup example (a copy in tmp, through the real
CLI). Every proposal applies, parses and imports; the written catalog loads as a hand-written one does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify.cli import app
from verify.config.catalog import load_mutations
from verify.config.settings import load_config
from verify.mutation import all_mutations, reset_registry
from verify.mutation.apply import Applied, apply_mutation
from verify.propose.check import import_failures
from verify.propose.edit import BugClass
from verify.propose.scanner import scan_text

ROOT = Path(__file__).resolve().parents[2]
LOOKUP = ROOT / "examples" / "lookup-engine"

# This repository's catalog entries in the classes the scanner covers (config, scheduler, loader and other
# runner-specific bugs are not asked for), each with its class.
IN_CLASS = {
    "rejection-ignores-draft-prob": BugClass.RATIO,  # u * q < p -> u < p
    "residual-not-subtracting-draft": BugClass.RESIDUAL,
    "candidate-residual-drops-candidates": BugClass.RESIDUAL,
    "greedy-accepts-one-extra": BugClass.ACCEPTANCE,
    "bonus-from-last-row": BugClass.BONUS,
    "draft-context-positions-shifted": BugClass.POSITIONS,
    "store-offset": BugClass.POSITIONS,
    "pending-context-shifted": BugClass.CACHE,
    "skip-draft-kv-write": BugClass.CACHE,
    "force-causal-block-mask": BugClass.MASK,
    "sdpa-causal-block-mask": BugClass.MASK,
    "store-window": BugClass.MASK,
    "draft-q-wrong-temperature": BugClass.TEMPERATURE,
    "q-handed-untempered": BugClass.TEMPERATURE,
    "target-p-untempered-in-verify": BugClass.TEMPERATURE,
    "prefill-token-untempered": BugClass.TEMPERATURE,
    "walk-q-wrong-temperature": BugClass.TEMPERATURE,
    "top-k-not-applied": BugClass.FILTERS,
    "draft-q-ignores-top-p-top-k": BugClass.FILTERS,
    "target-p-ignores-top-p-top-k": BugClass.FILTERS,
}
# The lookup example's catalog: its template-made entries, each in a class.
LOOKUP_IN_CLASS = {
    "ratio-inverted": BugClass.RATIO,
    "residual-not-subtracting-draft": BugClass.RESIDUAL,
    "bonus-off-by-one": BugClass.BONUS,
    "acceptance-past-first-mismatch": BugClass.ACCEPTANCE,
    "cache-crop-off-by-one": BugClass.CACHE,
    "cache-write-shifted": BugClass.CACHE,
    "position-offset": BugClass.POSITIONS,
}


@pytest.fixture(autouse=True)
def _fresh_registry():
    reset_registry()
    yield
    reset_registry()


def _covered(root: Path, catalog: dict, in_class: dict[str, BugClass], proposals: list) -> list[str]:
    """The catalog entries a proposal of the same class lands in: same file, its first changed line inside the
    entry's anchor."""
    hits = []
    for name, bug_class in in_class.items():
        applied = apply_mutation(catalog[name], root)
        assert isinstance(applied, Applied), name
        if any(
            p.file == applied.file and p.bug_class is bug_class and applied.first_line <= p.line <= applied.last_line
            for p in proposals
        ):
            hits.append(name)
    return hits


def test_the_runners_proposals_cover_the_catalogs_entries_in_their_classes_and_all_import() -> None:
    config = load_config(ROOT)
    catalog = load_mutations(config)
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "runner").rglob("*.py") if "fixtures" not in p.parts)
    proposals = [p for rel in files for p in scan_text((ROOT / rel).read_text(), rel)[0]]
    hits = _covered(ROOT, catalog, IN_CLASS, proposals)
    missed = sorted(set(IN_CLASS) - set(hits))
    assert len(hits) / len(IN_CLASS) >= 0.7, f"{len(hits)}/{len(IN_CLASS)} covered; missed {missed}"
    print(f"runner: {len(proposals)} proposals cover {len(hits)}/{len(IN_CLASS)} in-class catalog entries; "
          f"missed {missed}")  # fmt: skip
    assert import_failures(ROOT, config.import_paths, proposals) == {}


def _lookup_copy(tmp_path: Path) -> Path:
    root = tmp_path / "lookup-engine"
    shutil.copytree(LOOKUP, root, ignore=shutil.ignore_patterns("__pycache__", ".dflash-cache"))
    with (root / "pyproject.toml").open("a") as table:
        table.write('\n[tool.dflash]\nmutation_modules = ["engine_mutations"]\nsource_roots = ["lookupspec"]\n'
                    'gates = ["tests"]\ngate_marker = ""\n')  # fmt: skip
    return root


def test_the_observer_module_is_not_scanned(tmp_path) -> None:
    from verify.propose.api import source_files

    root = _lookup_copy(tmp_path)
    # Before any `observe` is configured (as `dflash init` scans), the observer is known by its shape.
    files = source_files(load_config(root))
    assert "lookupspec/observe.py" not in files and "lookupspec/accept.py" in files
    with (root / "pyproject.toml").open("a") as table:
        table.write('observe = "lookupspec.observe:make_observer"\n')
    files = source_files(load_config(root))
    assert "lookupspec/observe.py" not in files and "lookupspec/accept.py" in files
    # Named by the setting, an observer of any shape is left out.
    observe = root / "lookupspec" / "observe.py"
    observe.write_text(observe.read_text().replace("    workloads = (", "    names = ("))
    assert "lookupspec/observe.py" not in source_files(load_config(root))


def test_a_flat_project_s_environments_and_builds_are_not_scanned(tmp_path) -> None:
    from verify.propose.api import source_files

    root = tmp_path / "flat"
    engine = "def accept(u, p, q):\n    return u * q < p\n"
    for rel in ("engine.py", "venv/lib/python3.11/site-packages/pkg/core.py", "pyenv/lib/site.py",
                "build/lib/engine.py", "node_modules/x/gen.py", "pkg/rule.py", "pkg/env/__init__.py",
                "pkg/env/step.py", "tests/test_rule.py"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(engine)
    (root / "pyenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # an environment by its marker, any name
    (root / "pyproject.toml").write_text(
        '[tool.dflash]\nmutation_modules = ["m"]\nsource_roots = ["."]\ngates = ["tests"]\ngate_marker = ""\n'
    )
    # A subpackage that happens to bear one of those names is code, and scanned.
    assert source_files(load_config(root)) == ["engine.py", "pkg/env/__init__.py", "pkg/env/step.py", "pkg/rule.py"]


def test_propose_on_the_lookup_example_writes_a_catalog_that_loads_and_covers_its_own(tmp_path) -> None:
    root = _lookup_copy(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    done = CliRunner().invoke(app, ["mutations", "propose", "--project", str(root)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "wrote proposed_mutations.py" in done.output and 'add "proposed_mutations"' in done.output
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.name != "proposed_mutations.py"}
    assert after == before  # nothing of the user's is touched; the catalog is the one new file
    config = load_config(root)
    hand_written = load_mutations(config)
    text = (root / "pyproject.toml").read_text().replace('["engine_mutations"]', '["proposed_mutations"]')
    (root / "pyproject.toml").write_text(text)
    proposed = load_mutations(load_config(root))
    assert all(isinstance(apply_mutation(m, root), Applied) for m in proposed.values())
    classes = {m.name.rsplit("-", 2)[0] for m in proposed.values()}
    assert {"ratio-inverted", "residual-wrong", "bonus-off-by-one", "position-offset"} <= classes
    from verify.propose.scanner import Proposal

    as_proposals = [
        Proposal(BugClass(next(c for c in BugClass if m.name.startswith(c.value))), m.file,
                 apply_mutation(m, root).first_line, m.anchor, m.replacement, m.bug_class)  # type: ignore[union-attr]
        for m in proposed.values()
    ]  # fmt: skip
    hits = _covered(root, hand_written, LOOKUP_IN_CLASS, as_proposals)
    print(f"lookup: {len(proposed)} proposals cover {len(hits)}/{len(LOOKUP_IN_CLASS)} of its catalog's entries")
    assert len(hits) == len(LOOKUP_IN_CLASS), sorted(set(LOOKUP_IN_CLASS) - set(hits))
    again = CliRunner().invoke(app, ["mutations", "propose", "--project", str(root)])
    assert again.exit_code == 0  # its own file is replaced; a file of the user's is refused
    refused = CliRunner().invoke(
        app, ["mutations", "propose", "--project", str(root), "--output", "engine_mutations.py"]
    )
    assert refused.exit_code == 2 and "not overwriting engine_mutations.py" in refused.output
    assert all_mutations()  # the registry holds what the last load registered
