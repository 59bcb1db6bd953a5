"""`dflash generate` through typer's CliRunner on the shipped fixture."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from runner import Engine, SamplingParams
from verify.cli import app
from verify.fixtures import FIXTURES_ROOT

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


def test_generate_refuses_bad_input() -> None:
    runner = CliRunner()
    base = ["generate", "--target", str(FIXTURE / "target")]
    assert runner.invoke(app, [*base, "--prompt-ids", "1 x"]).exit_code == 2
    assert runner.invoke(app, [*base, "--prompt", "hello"]).exit_code == 2  # no tokenizer.json
    out_of_vocab = runner.invoke(app, [*base, "--prompt-ids", "1 999"])
    assert out_of_vocab.exit_code == 2 and "InvalidRequestError" in out_of_vocab.output
    missing = runner.invoke(app, ["generate", "--target", "/nonexistent", "--prompt-ids", "1"])
    assert missing.exit_code == 2 and "CheckpointError" in missing.output
