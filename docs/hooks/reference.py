"""The reference pages' generated parts, rendered from the code and committed in the markdown, so a reader on the
repository page or in an editor sees them, and so they cannot drift.

A part sits between the marker lines `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`: `cli` (every
command's `--help`, from the typer app), `config-keys` (the `[tool.dflash]` keys from `ProjectConfig`'s field
definitions and their `metadata["doc"]`), `catalog` (the embedded mutation catalog from its registry) and
`templates` (the bug-class templates `verify` exports, with the gate kit check that kills each).
`python docs/hooks/reference.py` (`make reference`) rewrites every part of every page from the code;
`tests/docs/test_reference.py` fails when a committed part differs from what the code generates. As an mkdocs
hook it fills the parts again at build time. Knows nothing of the site's theme; imports the CLI and the
settings, never torch.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# A part's start marker, then (once written) its text and its end marker; a page with only the start marker
# (a new part) gets both written.
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->\n(?:.*?^<!-- end generated: \1 -->\n)?", re.MULTILINE | re.DOTALL)
PAGES = ROOT / "docs"
HELP_WIDTH = 100  # the terminal width the `--help` texts are rendered at


def _commands() -> Iterator[list[str]]:
    """Every command path of the app, groups before their subcommands, in registration order."""
    import typer

    from verify.cli import app

    def walk(command: Any, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])


def cli_reference() -> str:
    """One section a command: its heading and its `--help`, exactly as a terminal shows it."""
    from typer.testing import CliRunner

    from verify.cli import app

    sections = []
    for path in _commands():
        result = CliRunner().invoke(app, [*path, "--help"], prog_name="dflash", terminal_width=HELP_WIDTH)
        if result.exit_code != 0:
            raise RuntimeError(f"dflash {' '.join(path)} --help exited {result.exit_code}: {result.output}")
        title = " ".join(["dflash", *path])
        sections.append(f"## `{title}`\n\n```text\n{result.output.rstrip()}\n```\n")
    return "\n".join(sections)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _toml(value: object) -> str:
    """A default as TOML shows it: lists, strings, numbers, and a record (job_resources) as an inline table."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in dataclasses.asdict(value).items()) + "}"
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def config_keys() -> str:
    """The `[tool.dflash]` keys: name, default and the field's own doc sentence."""
    from verify.config.settings import ProjectConfig

    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    for field in dataclasses.fields(ProjectConfig):
        if field.name == "root":  # the folder holding pyproject.toml, not a key
            continue
        doc = field.metadata.get("doc")
        if not doc:
            raise RuntimeError(f"ProjectConfig.{field.name} has no metadata['doc'] for the configuration reference")
        if doc.startswith("Required: "):
            default, doc = "(required)", doc.removeprefix("Required: ")
            doc = doc[:1].upper() + doc[1:]
        elif field.default_factory is not dataclasses.MISSING:
            default = f"`{_toml(field.default_factory())}`"
        else:
            default = "(not set)" if field.default is None else f"`{_toml(field.default)}`"
        rows.append(f"| `{field.name}` | {default} | {_cell(doc)} |")
    return "\n".join(rows) + "\n"


def catalog() -> str:
    """The embedded catalog: name, mutated file, bug class and the gates pinned to kill it."""
    from verify.config.catalog import load_mutations
    from verify.config.settings import load_config

    mutations = load_mutations(load_config(ROOT))
    rows = [
        f"The embedded catalog registers {len(mutations)} mutations.\n",
        "| mutation | file | bug class | pinned gates |",
        "| --- | --- | --- | --- |",
    ]
    for name, mutation in sorted(mutations.items()):
        pins = ", ".join(f"`{pin}`" for pin in mutation.expect_killed_by) or "-"
        rows.append(f"| `{name}` | `{Path(mutation.file).name}` | {_cell(mutation.bug_class)} | {pins} |")
    return "\n".join(rows) + "\n"


def templates() -> str:
    """The bug-class templates: the call, the bug class, an anchor and what it becomes, the kit check that kills it."""
    from verify.templates import TEMPLATES

    rows = ["| template | bug class | anchor -> replacement | killed by |", "| --- | --- | --- | --- |"]
    for name, template in TEMPLATES.items():
        call = f"`{name.replace('-', '_')}(file, anchor)`"
        change = f"`{_cell(template.example_anchor)}` -> `{_cell(template.example_replacement)}`"
        rows.append(f"| {call} | {_cell(template.bug_class)} | {change} | {_cell(template.killed_by)} |")
    return "\n".join(rows) + "\n"


GENERATORS = {"cli": cli_reference, "config-keys": config_keys, "catalog": catalog, "templates": templates}


def render(markdown: str) -> str:
    """`markdown` with every generated part written from the code; an unknown part is an error, never left blank."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise RuntimeError(f"unknown generated part {name!r} (known: {', '.join(GENERATORS)})")
        text = GENERATORS[name]().rstrip("\n")
        return f"<!-- generated: {name} -->\n\n{text}\n\n<!-- end generated: {name} -->\n"

    return MARKER.sub(fill, markdown)


def pages() -> list[Path]:
    """The docs pages that hold a generated part."""
    return sorted(p for p in PAGES.rglob("*.md") if MARKER.search(p.read_text("utf-8")))


def stale_pages() -> list[Path]:
    """The pages whose committed parts differ from what the code generates now."""
    return [page for page in pages() if render(text := page.read_text("utf-8")) != text]


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def main() -> int:
    """Rewrite every page's generated parts (`make reference`); with `--check`, only say which are stale (exit 1)."""
    stale = stale_pages()
    if "--check" in sys.argv[1:]:
        for page in stale:
            print(f"{_shown(page)}: its generated parts are stale; run `make reference`", file=sys.stderr)
        return 1 if stale else 0
    for page in stale:
        page.write_text(render(page.read_text("utf-8")), "utf-8")
        print(f"rewrote {_shown(page)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
