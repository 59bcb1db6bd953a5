"""The reference pages' generated parts come from the code: every command, every accepted `[tool.dflash]` key
with its own doc sentence, the whole catalog; the configuration page's TOML is this repository's own."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from verify.compat import tomllib
from verify.config import catalog, settings

ROOT = Path(__file__).resolve().parents[2]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def test_the_cli_reference_has_every_command_and_its_options() -> None:
    text = HOOK.cli_reference()
    for path in HOOK._commands():
        assert f"## `{' '.join(['dflash', *path])}`" in text
    for option in ("--version", "--first-kill", "--shard K/N", "--allow-partial", "--budget", "--adapter"):
        assert option in text, option


def test_the_configuration_table_is_exactly_the_keys_load_config_accepts() -> None:
    keys = {f.name for f in dataclasses.fields(settings.ProjectConfig)} - {"root"}
    accepted = (*settings._LIST_KEYS, *settings._SCALAR_KEYS, *getattr(settings, "_TABLE_KEYS", ()))
    assert keys == set(accepted)
    table = HOOK.config_keys()
    rows = re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)
    assert rows == [f.name for f in dataclasses.fields(settings.ProjectConfig) if f.name != "root"]
    for field in dataclasses.fields(settings.ProjectConfig):
        if field.name != "root":
            assert field.metadata["doc"].removeprefix("Required: ")[1:] in table


def test_a_key_without_a_doc_sentence_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(frozen=True)
    class Undocumented:
        root: Path
        jobs: int = 0

    monkeypatch.setattr(settings, "ProjectConfig", Undocumented)
    with pytest.raises(RuntimeError, match="Undocumented|jobs"):
        HOOK.config_keys()


def test_the_catalog_table_lists_every_registered_mutation() -> None:
    mutations = catalog.load_mutations(settings.load_config(ROOT))
    table = HOOK.catalog()
    assert f"registers {len(mutations)} mutations" in table
    assert set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.MULTILINE)) == set(mutations)


def test_the_templates_table_lists_every_template_with_its_killing_check() -> None:
    from verify.templates import TEMPLATES

    table = HOOK.templates()
    rows = re.findall(r"^\| `([a-z_]+)\(file, anchor\)` \|.*\| (assert_[a-z_]+)", table, re.MULTILINE)
    assert [name for name, _ in rows] == [name.replace("-", "_") for name in TEMPLATES]


def test_an_unknown_generated_part_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="unknown generated part 'nope'"):
        HOOK.render("text\n<!-- generated: nope -->\n")


def test_the_configuration_page_shows_this_repositorys_tables() -> None:
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text("utf-8")
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", page, re.DOTALL)]
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]
    assert [b["tool"] for b in blocks] == [{"dflash": tool["dflash"]}, {"mutmut": tool["mutmut"]}]


def _tested_typer() -> bool:
    """Whether the installed typer is the one constraints.txt pins: the CLI page is its rendering of the help
    (typer 0.24, the floor of our range, writes `PATH` where 0.29 writes `<path>`), so only that one can match."""
    from importlib import metadata

    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    return metadata.version("typer") == pins.get("typer")


def test_the_committed_generated_parts_are_what_the_code_generates() -> None:
    """The parts are committed in the markdown (read on the repository page, in an editor) and cannot go stale.
    The CLI page is compared under the tested typer only (CI's run at the floors of our ranges has another)."""
    stale = [str(page.relative_to(ROOT)) for page in HOOK.stale_pages()]
    if not _tested_typer():
        stale = [page for page in stale if page != "docs/reference/cli.md"]
    assert stale == [], f"{stale}: run `make reference` (python docs/hooks/reference.py) and commit the pages"


def test_the_reference_pages_hold_their_tables_not_placeholders() -> None:
    pages = {p.relative_to(ROOT).as_posix() for p in HOOK.pages()}
    assert {"docs/reference/cli.md", "docs/reference/configuration.md", "docs/reference/catalog.md"} <= pages
    gatekit = (ROOT / "docs" / "reference" / "gatekit.md").read_text("utf-8")
    assert "| `ratio_inverted(file, anchor)` |" in gatekit
    configuration = (ROOT / "docs" / "reference" / "configuration.md").read_text("utf-8")
    assert '| `gates` | `["tests/gates"]` |' in configuration
    for page in HOOK.pages():
        text = page.read_text("utf-8")
        assert text.count("<!-- generated: ") == text.count("<!-- end generated: "), page


def test_a_new_marker_is_filled_and_a_stale_part_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = HOOK.render("intro\n<!-- generated: templates -->\noutro\n")
    assert fresh.startswith("intro\n<!-- generated: templates -->\n\n| template |")
    assert fresh.endswith("\n\n<!-- end generated: templates -->\noutro\n") and HOOK.render(fresh) == fresh
    stale = fresh.replace("ratio_inverted", "ratio_upside_down")
    assert HOOK.render(stale) == fresh
    page = tmp_path / "page.md"
    page.write_text(stale, "utf-8")
    monkeypatch.setattr(HOOK, "PAGES", tmp_path)
    monkeypatch.setattr("sys.argv", ["reference.py", "--check"])
    assert HOOK.main() == 1 and page.read_text("utf-8") == stale  # --check changes nothing
    monkeypatch.setattr("sys.argv", ["reference.py"])
    assert HOOK.main() == 0 and page.read_text("utf-8") == fresh
    monkeypatch.setattr("sys.argv", ["reference.py", "--check"])
    assert HOOK.main() == 0
