"""`dflash generate`: run the runner on one prompt and print its tokens, acceptance lengths and speed.

torch and the runner are imported inside the command, so `dflash --help` never pays for them; sampling
defaults are the runner's own (`SamplingParams`), applied when an option is left out.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from runner import Engine, SamplingParams


def _ids(option: str, text: str | None) -> tuple[int, ...]:
    """ "1 2 3" or "1,2,3" -> (1, 2, 3)."""
    try:
        return tuple(int(t) for t in (text or "").replace(",", " ").split())
    except ValueError as exc:
        raise typer.BadParameter(f"{option} must be integers: {exc}") from exc


def _prompt_ids(target: Path, prompt_ids: str | None, prompt: str | None) -> list[int]:
    if (prompt_ids is None) == (prompt is None):
        raise typer.BadParameter("give exactly one of --prompt-ids and --prompt")
    if prompt_ids is not None:
        return list(_ids("--prompt-ids", prompt_ids))
    tokenizer_file = target / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise typer.BadParameter(f"--prompt needs {tokenizer_file}; use --prompt-ids")
    from tokenizers import Tokenizer  # imported only when text prompts are used

    return Tokenizer.from_file(str(tokenizer_file)).encode(str(prompt)).ids


def _timed(engine: Engine, ids: list[int], params: SamplingParams) -> tuple[dict, float]:
    start = time.perf_counter()
    (out,) = engine.generate([ids], params)
    elapsed = time.perf_counter() - start
    lengths = list(out.acceptance_lengths)
    return {
        "token_ids": list(out.token_ids),
        "acceptance_lengths": lengths,
        # None, not 0.0, when no verify step ran (the prefill's token already finished the request).
        "mean_acceptance": sum(lengths) / len(lengths) if lengths else None,
        "finish_reason": out.finish_reason,
        "tokens_per_s": len(out.token_ids) / elapsed,
    }, elapsed


def generate(
    target: Annotated[Path, typer.Option(help="Target checkpoint folder (HF format).")],
    draft: Annotated[Path | None, typer.Option(help="DFlash draft folder; omit for plain decoding.")] = None,
    prompt_ids: Annotated[str | None, typer.Option(help='Prompt token ids, e.g. "1 2 3".')] = None,
    prompt: Annotated[str | None, typer.Option(help="Prompt text (needs tokenizer.json in the target).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Tokens to generate [default: the runner's, 64].")] = None,
    temperature: Annotated[float | None, typer.Option(help="0 for greedy [default: 0].")] = None,
    seed: Annotated[int | None, typer.Option(help="Per-request seed for sampling.")] = None,
    stop: Annotated[
        str | None, typer.Option(help='Stop token ids, e.g. "2 7"; the target\'s eos_token_id also stops.')
    ] = None,
    ignore_eos: Annotated[bool, typer.Option(help="Do not stop at the target's eos_token_id.")] = False,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float32 or bfloat16.")] = "float32",
    compare_plain: Annotated[bool, typer.Option(help="Also run plain decoding and compare speed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Generate from one prompt with speculative decoding (or plain decoding without --draft).

    \b
    Example:
      dflash generate --target runner/fixtures/stride-dflash/target \\
        --draft runner/fixtures/stride-dflash/draft --prompt-ids "3 6 9 12" --max-tokens 32 --compare-plain
    """
    from runner import Engine, RunnerError, SamplingParams

    ids = _prompt_ids(target, prompt_ids, prompt)
    defaults = SamplingParams()
    try:
        params = SamplingParams(
            max_tokens=defaults.max_tokens if max_tokens is None else max_tokens,
            temperature=defaults.temperature if temperature is None else temperature,
            seed=seed,
            stop_token_ids=_ids("--stop", stop),
            ignore_eos=ignore_eos,
        )
        engine = Engine.from_pretrained(target, draft, device=device, dtype=dtype)
        _timed(engine, ids, params)  # warm-up: first-call allocations are not decoding speed
        result, _ = _timed(engine, ids, params)
        report = {"speculative" if draft else "plain": result}
        if compare_plain and draft is not None:
            plain = Engine.from_pretrained(target, None, device=device, dtype=dtype)
            _timed(plain, ids, params)
            report["plain"], _ = _timed(plain, ids, params)
            report["speedup"] = result["tokens_per_s"] / report["plain"]["tokens_per_s"]
            report["same_tokens"] = report["plain"]["token_ids"] == result["token_ids"]
    except RunnerError as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report))
        return
    for name, run in report.items():
        if not isinstance(run, dict):
            continue
        typer.echo(f"[{name}] tokens: {' '.join(map(str, run['token_ids']))} (finished: {run['finish_reason']})")
        mean = run["mean_acceptance"]
        summary = "no verify step ran" if mean is None else f"mean {mean:.2f}"
        typer.echo(f"[{name}] acceptance lengths: {run['acceptance_lengths']} ({summary})")
        typer.echo(f"[{name}] {run['tokens_per_s']:.1f} tokens/s")
    if "speedup" in report:
        typer.echo(f"speculative / plain: {report['speedup']:.2f}x, same tokens: {report['same_tokens']}")
