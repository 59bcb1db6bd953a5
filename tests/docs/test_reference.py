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
from verify.run.config import catalog, settings

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
    rows = re.findall(r"^\| `templates\.([a-z_]+)\(file, anchor\)` \|.*\| (assert_[a-z_]+)", table, re.MULTILINE)
    assert [name for name, _ in rows] == [name.replace("-", "_") for name in TEMPLATES]


def test_an_unknown_generated_part_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="unknown generated part 'nope'"):
        HOOK.render("text\n<!-- generated: nope -->\n")


def test_the_configuration_page_shows_this_repositorys_tables() -> None:
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text("utf-8")
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", page, re.DOTALL)]
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]
    assert [b["tool"] for b in blocks] == [{"dflash": tool["dflash"]}, {"mutmut": tool["mutmut"]}]
