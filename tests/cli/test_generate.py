"""`dflash generate` through typer's CliRunner on the shipped fixture."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from runner import Engine, SamplingParams
from verify.cli import app
from verify.fixtures.catalog import FIXTURES_ROOT

FIXTURE = FIXTURES_ROOT / "stride-dflash"
PROMPT = [3, 6, 9, 12, 15, 18]


def test_generate_json_matches_the_engine() -> None:
    args = ["generate", "--target", str(FIXTURE / "target"), "--draft", str(FIXTURE / "draft")]
    result = CliRunner().invoke(
        app, [*args, "--prompt-ids", " ".join(map(str, PROMPT)), "--max-tokens", "12", "--compare-plain", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    (expected,) = Engine.from_pretrained(FIXTURE / "target", FIXTURE / "draft").generate(
        [PROMPT], SamplingParams(max_tokens=12)
    )
    assert report["speculative"]["token_ids"] == list(expected.token_ids)
    assert report["speculative"]["acceptance_lengths"] == list(expected.acceptance_lengths)
    assert report["same_tokens"] is True
    assert report["speculative"]["tokens_per_s"] > 0 and report["plain"]["tokens_per_s"] > 0


def test_generate_prints_tokens_and_acceptance() -> None:
    result = CliRunner().invoke(
        app, ["generate", "--target", str(FIXTURE / "target"), "--prompt-ids", "1 2 3", "--max-tokens", "4"]
    )
    assert result.exit_code == 0, result.output
    assert "[plain] tokens:" in result.output and "tokens/s" in result.output


def test_generate_says_when_the_first_token_stopped_the_request() -> None:
    """A stop id equal to the prefill's token ends the request before any verify step: the output says so
    instead of printing a mean acceptance of 0.00 over no steps."""
    args = ["generate", "--target", str(FIXTURE / "target"), "--draft", str(FIXTURE / "draft")]
    args += ["--prompt-ids", "3 6 9", "--max-tokens", "8", "--stop", "12"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "tokens: 12 (finished: stop)" in result.output
    assert "acceptance lengths: [] (no verify step ran)" in result.output
    report = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    assert report["speculative"]["mean_acceptance"] is None


def test_generate_refuses_bad_input() -> None:
    runner = CliRunner()
    base = ["generate", "--target", str(FIXTURE / "target")]
    assert runner.invoke(app, [*base, "--prompt-ids", "1 x"]).exit_code == 2
    assert runner.invoke(app, [*base, "--prompt", "hello"]).exit_code == 2  # no tokenizer.json
    out_of_vocab = runner.invoke(app, [*base, "--prompt-ids", "1 999"])
    assert out_of_vocab.exit_code == 2 and "InvalidRequestError" in out_of_vocab.output
    missing = runner.invoke(app, ["generate", "--target", "/nonexistent", "--prompt-ids", "1"])
    assert missing.exit_code == 2 and "CheckpointError" in missing.output


def test_generate_takes_text_through_the_targets_tokenizer(tmp_path) -> None:
    import shutil

    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    target = tmp_path / "target"
    shutil.copytree(FIXTURE / "target", target)
    words = {f"w{i}": i for i in range(47)}
    tokenizer = Tokenizer(WordLevel(vocab={**words, "[UNK]": 46}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(target / "tokenizer.json"))
    text = " ".join(f"w{t}" for t in PROMPT)
    by_text = CliRunner().invoke(
        app, ["generate", "--target", str(target), "--prompt", text, "--max-tokens", "6", "--json"]
    )
    by_ids = CliRunner().invoke(
        app,
        [
            "generate",
            "--target",
            str(target),
            "--prompt-ids",
            " ".join(map(str, PROMPT)),
            "--max-tokens",
            "6",
            "--json",
        ],
    )
    assert by_text.exit_code == 0, by_text.output
    assert json.loads(by_text.output)["plain"]["token_ids"] == json.loads(by_ids.output)["plain"]["token_ids"]


def test_fixtures_cli_default_is_the_catalog_default() -> None:
    """The CLI names the default fixture as text (so --help imports no torch); it must stay the catalog's."""
    from verify.cli.fixtures import DEFAULT_FIXTURE as CLI_DEFAULT
    from verify.fixtures.catalog import DEFAULT_FIXTURE

    assert CLI_DEFAULT == DEFAULT_FIXTURE


def test_generate_stops_at_stop_ids() -> None:
    base = ["generate", "--target", str(FIXTURE / "target"), "--draft", str(FIXTURE / "draft")]
    prompt = ["--prompt-ids", " ".join(map(str, PROMPT)), "--max-tokens", "12", "--json"]
    full = json.loads(CliRunner().invoke(app, [*base, *prompt]).output)["speculative"]
    stop = full["token_ids"][4]
    cut = full["token_ids"].index(stop) + 1
    result = CliRunner().invoke(app, [*base, *prompt, "--stop", f"{stop} 47"])
    assert result.exit_code == 0, result.output
    stopped = json.loads(result.output)["speculative"]
    assert stopped["token_ids"] == full["token_ids"][:cut] and stopped["finish_reason"] == "stop"
    bad = CliRunner().invoke(app, [*base, *prompt, "--stop", "999"])
    assert bad.exit_code == 2 and "stop_token_ids" in bad.output
    assert CliRunner().invoke(app, [*base, *prompt, "--stop", "x"]).exit_code == 2
