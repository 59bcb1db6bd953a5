"""What `dflash verify explain` sees of this engine, step by step ([tool.dflash] observe =
"lookupspec.observe:make_observer"): each target forward's drafted block, start position, cache length and
logits, the target's law handed to the acceptance rule (sampled), the acceptance lengths and output tokens of
fixed prompts (greedy and sampled), the batched scores, and plain decoding's sampled tokens. The model's forward
and the engine's acceptance rule are wrapped for the run and restored after: the engine knows nothing of it."""

from __future__ import annotations

from typing import Any

import lookupspec.engine as engine_module
from lookupspec.drafter import NGramDrafter
from lookupspec.engine import LookupEngine, plain_generate, score
from lookupspec.model import TinyLM

PROMPTS = ([1, 2, 3, 1, 2], [5, 7, 5, 7, 5, 7, 0], [4, 9, 4, 11, 3])


class Observer:
    workloads = ("greedy", "sampled", "batch scores", "plain sampled")
    gates = {
        "drafted": "none: a drafter's choice never changes the output (an acceptance-rate floor would see it)",
        "target logits": "speculative = plain (assert_speculative_equals_plain)",
        "cache length": "speculative = plain (assert_speculative_equals_plain)",
        "batch logits": "batch = solo (assert_batch_equals_solo)",
        "output tokens": "speculative = plain (assert_speculative_equals_plain)",
        "sampled tokens": "the first token's law (assert_first_token_law)",
        "target law": "the first token's law (assert_first_token_law) at a temperature other than 1",
        "plain sampled tokens": "none: no test samples plain decoding at a temperature other than 1",
    }

    def run(self, workload: str, emit: Any) -> None:
        model = TinyLM()
        if workload == "batch scores":
            for row, logits in enumerate(score(model, [list(p) for p in PROMPTS])):
                emit(-1, row, "batch logits", logits)
            return
        if workload == "plain sampled":  # the reference decoding's own sampler, seeded per row
            for row, prompt in enumerate(PROMPTS):
                emit(-1, row, "plain sampled tokens", plain_generate(model, list(prompt), 16, 0.7, seed=row))
            return
        engine = LookupEngine(model, NGramDrafter())
        # Sampled at a temperature other than 1: at 1, a temperature dropped or applied twice changes nothing.
        temperature = 0.0 if workload == "greedy" else 0.7
        for row, prompt in enumerate(PROMPTS):
            self._generate(model, engine, list(prompt), temperature, row, emit)

    @staticmethod
    def _generate(model: TinyLM, engine: LookupEngine, prompt: list[int], temperature: float, row: int,
                  emit: Any) -> None:  # fmt: skip
        step = {"n": -2}  # the first forward is the prefill (step -1); verify steps count from 0
        forward = model.forward

        def observed(tokens: Any, start: int, cache: Any) -> Any:
            step["n"] += 1
            if step["n"] >= 0:  # a verify step feeds the newest token, then the drafted block
                emit(step["n"], row, "drafted", tokens[1:])
            logits = forward(tokens, start, cache)
            emit(step["n"], row, "target start", start)
            emit(step["n"], row, "cache length", cache.length)
            emit(step["n"], row, "target logits", logits)
            return logits

        accept = engine_module.accept

        def observed_accept(p: Any, q: Any, drafted: Any, generator: Any) -> Any:
            emit(step["n"], row, "target law", p)  # [k + 1, V]: the law the rule keeps drafts by
            return accept(p, q, drafted, generator)

        model.forward = observed  # type: ignore[method-assign]
        engine_module.accept = observed_accept  # type: ignore[assignment]
        try:
            generation = engine.generate(prompt, 16, temperature, seed=row)
        finally:
            del model.forward
            engine_module.accept = accept
        emit(-1, row, "acceptance lengths", generation.acceptance_lengths)
        # Greedy outputs must equal the pristine ones; sampled ones only follow the same law, so a changed draft
        # changes them without a bug: they go under their own name.
        emit(-1, row, "output tokens" if temperature == 0 else "sampled tokens", generation.token_ids)


def make_observer() -> Observer:
    return Observer()
