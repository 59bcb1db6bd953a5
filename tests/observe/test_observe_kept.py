"""A verify run's survivors are explained once per tree: the next run of the same tree shows the same explanation
without observing again; `--no-cache` or an edit to a gate explains again. Through the
real CLI, on the toy without an observer (its gates are the workloads)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import verify.observe.api as observe_api
from tests.observe.test_observe_gates import _without_observer
from verify.cli import app

runner = CliRunner()


def _verify(toy: Path, *extra: str) -> dict:
    out = toy / "verify.json"
    done = runner.invoke(app, ["verify", "-m", "scale-off", "--json", str(out), "--project", str(toy), *extra])
    assert done.exit_code in (0, 1), done.output
    entry = next(m for m in json.loads(out.read_text())["mutations"] if m["name"] == "scale-off")
    assert entry["status"] == "survived", entry
    return entry


def _count_observations(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = observe_api.explain_catalog

    def counted(config, mutations, options=None):
        seen.extend(mutations)
        return real(config, mutations, options)

    monkeypatch.setattr(observe_api, "explain_catalog", counted)
    return seen


def test_a_survivors_explanation_is_kept_until_its_tree_or_its_mutation_changes(toy: Path, monkeypatch) -> None:
    _without_observer(toy)
    seen = _count_observations(monkeypatch)
    first = _verify(toy)
    assert seen == ["scale-off"]
    assert first["first_divergence"].startswith("first divergence: tests/test_toy_ids.py::test_ids_come_out")
    assert "toy.engine.scale" in first["explanation"]

    again = _verify(toy)  # the verdict replayed from the cache, the explanation too: nothing observed
    assert seen == ["scale-off"]
    assert (again["first_divergence"], again["explanation"]) == (first["first_divergence"], first["explanation"])

    _verify(toy, "--no-cache")  # neither read nor written
    assert seen == ["scale-off"] * 2

    gate = toy / "tests" / "test_toy_ids.py"
    gate.write_text(gate.read_text() + "\n# an edit to a gate changes the tree\n")
    edited = _verify(toy)
    assert seen == ["scale-off"] * 3
    assert edited["first_divergence"] == first["first_divergence"]


def test_a_torn_entry_is_a_miss_and_is_written_again(toy: Path, monkeypatch) -> None:
    _without_observer(toy)
    seen = _count_observations(monkeypatch)
    first = _verify(toy)
    entries = list((toy / ".dflash-cache").glob("explanation-*.json"))
    assert len(entries) == 1
    entries[0].write_text("{not json")
    again = _verify(toy)
    assert seen == ["scale-off"] * 2
    assert again["explanation"] == first["explanation"]
    assert json.loads(entries[0].read_text())["text"] == first["explanation"]
