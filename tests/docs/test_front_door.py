"""The front door's statements, each checked against what it describes so it cannot go stale: every command's
exit codes against the code that command runs, the gate counts and tables against the gates pytest collects,
the troubleshooting page's quoted messages against the source, install hints that name no published package,
the catalog page against the committed real run, and the site settings that make it work opened from files."""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import re
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from verify.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text("utf-8")
# A real `dflash verify --first-kill --no-cache --json` of this repository, committed (its commit is inside).
FIRST_KILL_RUN = DOCS / "runs" / "verify-first-kill.json"


def _commands() -> Iterator[tuple[str, Callable[..., Any]]]:
    """(`dflash ...`, the function it runs) for every command and group with a callback, the root excepted."""

    def walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    for path, command in walk(typer.main.get_command(app), []):
        callback = getattr(command.callback, "__wrapped__", command.callback)
        if path and callback is not None:
            yield " ".join(["dflash", *path]), callback


def _exit_codes(func: Callable[..., Any], seen: set[Any]) -> set[int]:
    """The codes `func` can exit with: every `EXIT_*` name it reads and every literal `Exit(n)`, through the
    verify.cli functions it calls (a call through a helper such as `_fail(message, code)` included)."""
    module = sys.modules[func.__module__]
    codes: set[int] = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(func)))):
        if isinstance(node, ast.Name) and node.id.startswith("EXIT_"):
            value = getattr(module, node.id)
            codes |= set(value.values()) if isinstance(value, dict) else {value}
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "Exit":
                if not node.args:
                    codes.add(0)
                elif isinstance(node.args[0], ast.Constant):
                    codes.add(node.args[0].value)
            if isinstance(node.func, ast.Name):
                target = module.__dict__.get(node.func.id)
                if inspect.isfunction(target) and target.__module__.startswith("verify.cli") and target not in seen:
                    seen.add(target)
                    codes |= _exit_codes(target, seen)
    return codes


def _documented_exit_codes() -> dict[str, set[int]]:
    """exit-codes.md: each `## ` section's commands (in backticks) and the codes in its table's first column."""
    page = (DOCS / "reference" / "exit-codes.md").read_text("utf-8")
    documented: dict[str, set[int]] = {}
    for section in re.split(r"^## ", page, flags=re.MULTILINE)[1:]:
        heading, _, body = section.partition("\n")
        codes = {int(c) for row in re.findall(r"^\| ([\d /]+) \|", body, re.MULTILINE) for c in row.split("/")}
        for command in re.findall(r"`(dflash[^`]*)`", heading):
            documented[command] = codes
    return documented


def test_every_commands_exit_codes_are_the_codes_its_code_returns() -> None:
    documented = _documented_exit_codes()
    commands = dict(_commands())
    assert set(commands) == set(documented), "exit-codes.md must have a section for each command, and no other"
    for title, callback in commands.items():
        # 0: a normal return; 2: click's own usage errors, which every command has.
        assert documented[title] == _exit_codes(callback, {callback}) | {0, 2}, title


def test_the_exit_code_reader_sees_a_code_a_command_would_return() -> None:
    def show_like() -> None:  # what the stale page claimed of `verify show`: a 4
        raise typer.Exit(4)

    assert _exit_codes(show_like, set()) == {4}


@pytest.fixture(scope="module")
def gate_files() -> Counter[str]:
    """Gates per file label (`acceptance` for test_gate_acceptance.py), as pytest collects `-m gate`."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-m", "gate", "-p", "no:cacheprovider", "tests/gates"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    files = [line.partition("::")[0] for line in done.stdout.splitlines() if "::" in line]
    return Counter(Path(f).stem.removeprefix("test_gate_") for f in files)


@pytest.mark.parametrize("page", ["README.md", "docs/quickstart.md"])
def test_a_runs_gate_counts_are_the_gates_there_are(page: str, gate_files: Counter[str]) -> None:
    text = (ROOT / page).read_text("utf-8")
    total = re.findall(r"^(\d+) gates in (\d+) files$", text, re.MULTILINE)
    assert total == [(str(sum(gate_files.values())), str(len(gate_files)))], f"{page}: rerun the run it quotes"
    legend = dict(re.findall(r"\d+=([a-z_0-9]+)\((\d+)\)", text))
    if not legend:  # a run whose matrix names its files in its header, and those no mutation reached below it
        header = next(line for line in text.splitlines() if line.startswith("mutation "))
        below = text.partition("(not drawn): ")[2].partition("\nA assertion")[0]
        named = set(header.split()[2:]) | {label.strip() for label in below.replace("\n", " ").split(",")}
        assert named == set(gate_files), f"{page}: rerun the run it quotes"
        return
    assert legend == {label: str(n) for label, n in gate_files.items()}, f"{page}: rerun the run it quotes"


def test_no_norun_reason_states_a_gate_count() -> None:
    # A count in a reason nobody runs goes stale silently ("all 97 gates" outlived 22 new gates).
    stale = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in DOCS.rglob("*.md")
        for number, line in enumerate(page.read_text("utf-8").splitlines(), 1)
        if re.search(r"<!-- norun:.*\b\d+ gates", line)
    ]
    assert stale == []


def test_the_gates_table_names_every_gate_file(gate_files: Counter[str]) -> None:
    table = (DOCS / "concepts" / "gates.md").read_text("utf-8")
    named = set(re.findall(r"`test_gate_([a-z_0-9]+)`", table))
    assert named == set(gate_files)


def test_the_troubleshooting_page_quotes_messages_the_code_still_writes() -> None:
    page = (DOCS / "how-to" / "troubleshooting.md").read_text("utf-8")
    source = "\n".join(p.read_text("utf-8") for p in (ROOT / "verify").rglob("*.py"))
    quoted = [
        "the gates never imported the source roots",
        "is flaky:",
        "green on a re-run",
        "anchor not found",
        "anchor matches",
        "children can write wherever you can",
    ]
    for text in quoted:
        assert text in page and text in source, text
    assert "DFLASH_CONFINE" in source and "timeout_factor" in source and "baseline_timeout_s" in source


def test_no_install_hint_names_a_published_package() -> None:
    # dflash-verify is installed from its checkout or its wheel; `pip install 'dflash-verify[...]'` would ask PyPI.
    published = re.compile(r"pip install '?dflash-verify")
    texts = {"README.md": README} | {
        str(p.relative_to(ROOT)): p.read_text("utf-8") for p in [*DOCS.rglob("*.md"), *(ROOT / "verify").rglob("*.py")]
    }
    assert [name for name, text in texts.items() if published.search(text)] == []


def test_the_missing_mutmut_hint_names_mutmut_not_an_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from verify.sweep import mutmut_run
    from verify.sweep.requirement import MUTMUT_VERSION

    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(mutmut_run.shutil, "which", lambda _: None)
    with pytest.raises(FileNotFoundError, match=re.escape(f"pip install 'mutmut=={MUTMUT_VERSION}'")):
        mutmut_run.command()


def test_the_torch_pin_comes_with_the_index_that_serves_it() -> None:
    constraints = (ROOT / "constraints.txt").read_text("utf-8")
    makefile = (ROOT / "Makefile").read_text("utf-8")
    local = re.findall(r"^torch==[^\s+]+\+(\w+)$", constraints, re.MULTILINE)
    for build in local:  # a local version tag (+cpu) is not on PyPI: the README and make's hint name its index
        index = f"https://download.pytorch.org/whl/{build}"
        assert f"TORCH_INDEX={index}" in README and f"TORCH_INDEX={index}" in makefile
    assert "--extra-index-url $(TORCH_INDEX)" in makefile


def test_the_docs_extra_is_mkdocs_alone_and_make_docs_uses_it() -> None:
    from verify.compat import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    assert sorted(re.split(r"[<>=]", d)[0] for d in extras["docs"]) == ["mkdocs", "mkdocs-material"]
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert re.search(r"^docs: \$\(DOCSTAMP\)$", makefile, re.MULTILINE)
    assert "-e '.[docs]'" in makefile


def test_the_site_works_opened_from_files() -> None:
    # Folder URLs open a directory listing from file://, and the search index is fetched unless inlined.
    config = (ROOT / "mkdocs.yml").read_text("utf-8")
    assert re.search(r"^use_directory_urls: false$", config, re.MULTILINE)
    plugins = re.search(r"^plugins:\n((?:  - .*\n)+)", config, re.MULTILINE)
    assert plugins and {"search", "offline"} <= {line.strip("- \n") for line in plugins.group(1).splitlines()}
    # From files, search runs through iframe-worker's shim; the offline plugin loads it from unpkg.com unless a
    # polyfill already names iframe-worker, so the vendored copy must be that polyfill, intact.
    polyfills = re.search(r"^  polyfills:\n((?:    - .*\n)+)", config, re.MULTILINE)
    assert polyfills is not None
    shim = [line.strip("- \n") for line in polyfills.group(1).splitlines() if "iframe-worker" in line]
    assert shim == ["assets/iframe-worker/shim.js"]
    vendor = DOCS / "assets" / "iframe-worker"
    fields = dict(line.split(": ", 1) for line in (vendor / "VERSION").read_text("utf-8").splitlines())
    assert hashlib.sha256((vendor / fields["file"]).read_bytes()).hexdigest() == fields["sha256"]
    assert (vendor / "LICENSE").is_file()


def test_the_catalog_page_says_how_the_real_run_killed_each_entry() -> None:
    report = json.loads(FIRST_KILL_RUN.read_text("utf-8"))
    page = (DOCS / "reference" / "catalog.md").read_text("utf-8")
    by_refusal = sorted(
        m["name"]
        for m in report["mutations"]
        if m["status"] == "killed" and {o["outcome"] for o in m["outcomes"]} & {"assertion"} == set()
    )
    assert by_refusal, "the run killed every entry on an assertion: say so on the catalog page"
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    stated = f"{len(report['mutations']) - len(by_refusal)} entries were killed on an assertion and "
    assert stated + f"{words.get(len(by_refusal), len(by_refusal))} by a gate's refusal alone" in " ".join(page.split())
    for name in by_refusal:
        assert f"`{name}`" in page, f"catalog.md must name {name}: the real run killed it by a refusal"
    assert "assertion or a gate's refusal" in page
    assert report["project"]["commit"][:7] in page


def test_the_html_pages_not_covering_figure_is_the_real_runs() -> None:
    # The viewer's Tests tab counts a gate that ran against no mutant (neither killed nor covered one) as
    # Not Covering: after --first-kill, the gates no mutant reached before its first kill.
    report = json.loads(FIRST_KILL_RUN.read_text("utf-8"))
    gates = {gate["id"] for gate in report["baseline"]["gates"]}
    ran = {outcome["gate_id"] for m in report["mutations"] for outcome in m["outcomes"]}
    page = " ".join((DOCS / "reference" / "html-report.md").read_text("utf-8").split())
    assert f'"Not Covering {len(gates - ran)}/{len(gates)}"' in page


def test_the_committed_runs_are_of_the_catalog_and_gates_there_are(gate_files: Counter[str]) -> None:
    # A mutation or a gate file added since: run `dflash verify --first-kill --no-cache --json` again and commit it.
    from verify.config.catalog import load_mutations
    from verify.config.settings import load_config

    report = json.loads(FIRST_KILL_RUN.read_text("utf-8"))
    assert {m["name"] for m in report["mutations"]} == set(load_mutations(load_config(ROOT)))
    gate_ids = [gate["id"] for gate in report["baseline"]["gates"]]
    assert Counter(Path(g.partition("::")[0]).stem.removeprefix("test_gate_") for g in gate_ids) == gate_files
