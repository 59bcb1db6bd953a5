"""The embedded runner's observer: the fixture workloads, run step by step with every observable recorded.

Workloads, on each shipped pair (DFlash and DFlash2, the copy and the stride languages): one request alone (greedy),
a batch with more requests than rows on 4-slot pages (joins, finishes, row compaction), and a seeded sampled batch
(temperature, top-p and top-k); on a few pairs the dense draft path, a draft config with its output multiplier and
soft-cap set, a draft with a sliding-window layer (paged and dense), and the engine's edges (budgets and stop tokens
inside a block, a prefill token that ends a request, plain decoding, aborts, a corrupted store fed to the position
invariant); on every pair, a stop id, an eos id and a budget each landing strictly inside an accepted block (a token
with accepted tokens after it in the same step, so a scan that no longer cuts there shows); and the refusals
(`refusals.py`). It implements the observer protocol of `verify.observe.protocol`, as a user's engine would. Imports
the runner only when run, from wherever the import system serves it (the private copy, mutated or not); knows
nothing of mutations or comparisons."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["RunnerObserver", "make_observer"]

PAIRS = ("copy-dflash", "copy-dflash2", "stride-dflash", "stride-dflash2")
# What a gate of tests/gates compares to see an observable, and on which fixture (gatekit's helpers).
GATES = {
    "drafted": "drafted blocks alone vs batched, or vs the dense path (gatekit.assert_same_drafts; test_gate_drafts, "
    "test_gate_store_reads on the copy pair)",
    "block logits": "block logits vs the independent dense implementation (test_gate_numerics, "
    "gatekit.redraft_logits / dense_reference.py)",
    "target logits": "verify logits vs a fresh full forward (test_gate_numerics, runner.target.full_forward)",
    "prefill logits": "prefill logits vs a fresh full forward (test_gate_numerics)",
    "draft q": "the q handed to the acceptance rule (gatekit.rejection_calls; test_gate_sampling, test_gate_dflash2)",
    "rule q": "the q handed to the acceptance rule (gatekit.rejection_calls; test_gate_sampling, test_gate_dflash2)",
    "rule p": "the p handed to the acceptance rule vs sampling_probs of a fresh forward (gatekit.rejection_calls)",
    "rule accepted": "the acceptance rule's statistics (test_gate_sampling: accepts with min(1, p/q))",
    "rule next token": "the residual/bonus distribution (test_gate_sampling, test_gate_rules)",
    "greedy accepted": "greedy acceptance vs the longest matching prefix (test_gate_rules, test_gate_acceptance)",
    "output tokens": "speculative = plain decoding, seeded batched = solo (test_gate_acceptance, test_gate_sampling)",
    "committed": "the tokens committed at each step: acceptance vs the reference's (test_gate_acceptance)",
    "finished": "outputs, budgets and stop tokens (test_gate_acceptance, test_gate_lifecycle)",
    "acceptance lengths": "acceptance above the fixture's floor (test_gate_acceptance) or vs the reference",
    "draft store": "store contents vs the committed features' K/V (test_gate_store_reads, gatekit.redraft with "
    "right_context / wiped_store, on the copy pair)",
    "target cache": "verify logits vs a fresh forward (test_gate_numerics), which reads the cache",
    "store length": "store length = L - pending rows after every step (test_gate_store)",
    "pending positions": "pending rows at [store, L) (test_gate_store)",
    "pending features": "the pending context = the committed tokens' features (test_gate_numerics)",
    "dense history": "dense path = paged path (test_gate_paths)",
    "draft pages": "pages conserved and rows' pages apart (test_gate_store, test_gate_rules)",
    "target pages": "pages conserved and rows' pages apart (test_gate_store, test_gate_rules)",
    "free pages": "pages conserved: free + used = pool (test_gate_store, test_gate_lifecycle)",
    "rows and waiting": "admission never exceeds the rows (test_gate_rules)",
    "request": "which request sits in which row (gatekit.row_owners)",
    "trace record": "the trace agrees with the outputs (test_gate_trace)",
    "trace view": "the trace's per-request view (test_gate_trace)",
    "row moves": "row compaction (test_gate_drafts, test_gate_store_reads)",
    "refused": "a named refusal with its message (gatekit.assert_refused; test_gate_checkpoint, test_gate_rules)",
    "invariant": "a corrupted store raises PositionInvariantError (test_gate_store)",
    "error": "any gate running this workload goes red by exception",
}


def _fixtures() -> Path:
    import runner

    return Path(runner.__file__).resolve().parent / "fixtures"


def _prompts(pair: str) -> list[list[int]]:
    manifest = json.loads((_fixtures() / pair / "manifest.json").read_text())
    return [list(p) for p in manifest["audit_prompts"]]


class RunnerObserver:
    """Observer protocol: `workloads` (names, in order) and `run(workload, emit)`."""

    gates = GATES

    def __init__(self) -> None:
        self._runs: dict[str, Callable[[Any], None]] = {}
        for pair in PAIRS:
            self._runs[f"{pair}: solo greedy"] = functools.partial(self._solo, pair)
            self._runs[f"{pair}: batch greedy"] = functools.partial(self._batch, pair)
            self._runs[f"{pair}: batch sampled"] = functools.partial(self._sampled, pair)
            self._runs[f"{pair}: ends inside a block"] = functools.partial(self._inside_block, pair)
        for pair in ("copy-dflash2", "stride-dflash"):
            self._runs[f"{pair}: dense batch greedy"] = functools.partial(self._batch, pair, dense=True)
        self._runs["stride-dflash: scaled and capped draft"] = self._scaled
        self._runs["stride-dflash: windowed draft"] = functools.partial(self._windowed, dense=False)
        self._runs["stride-dflash: windowed dense draft"] = functools.partial(self._windowed, dense=True)
        self._runs["stride-dflash: edges"] = self._edges
        self._runs["stride-dflash: lifecycle"] = self._lifecycle
        self._runs["stride-dflash: invariant"] = self._invariant
        self._runs["refusals"] = self._refusals
        self.workloads = tuple(self._runs)

    def run(self, workload: str, emit: Any) -> None:
        self._runs[workload](emit)

    # -- building blocks ------------------------------------------------------------------------------------
    @staticmethod
    def _engine(folder: Path, draft: bool = True, **config: Any) -> Any:
        from runner import Engine, EngineConfig

        options = {"trace": True, **config}
        return Engine.from_pretrained(
            folder / "target", folder / "draft" if draft else None, config=EngineConfig(**options)
        )

    @staticmethod
    def _drive(engine: Any, prompts: list[list[int]], params: list[Any], emit: Any, max_steps: int = 200) -> list[int]:
        """Queue the requests, step to the end, recording each step's observables; returns the request ids."""
        from verify.observe.runner_hooks import record_state, watch

        ids = [engine.add_request(p, sp) for p, sp in zip(prompts, params, strict=True)]
        seen = 0
        with watch(engine, emit):
            while engine.has_unfinished() and engine.num_steps < max_steps:
                step = engine.num_steps
                finished = engine.step()
                seen = record_state(engine, emit, step, finished, seen)
        for request_id in ids:  # what the engine's user receives, whatever the steps it took
            out = engine.output(request_id)
            emit(-1, -1, "output tokens", (request_id, out.token_ids, str(out.finish_reason)))
        if engine.trace is not None:
            for request_id in ids:
                emit(-1, -1, "trace view", (request_id, engine.trace.drafted_blocks(request_id)))
        return ids

    @staticmethod
    def _greedy(max_tokens: int, **changes: Any) -> Any:
        from runner import SamplingParams

        return SamplingParams(max_tokens=max_tokens, **changes)

    # -- workloads --------------------------------------------------------------------------------------------
    def _solo(self, pair: str, emit: Any) -> None:
        self._drive(self._engine(_fixtures() / pair), _prompts(pair)[:1], [self._greedy(20)], emit)

    def _batch(self, pair: str, emit: Any, *, dense: bool = False) -> None:
        engine = self._engine(
            _fixtures() / pair, max_num_seqs=3, page_size=4, draft_attention="dense" if dense else "paged"
        )
        budgets = [7, 20, 11, 16, 5]
        self._drive(engine, _prompts(pair)[1:6], [self._greedy(n) for n in budgets], emit)

    def _sampled(self, pair: str, emit: Any) -> None:
        from runner import SamplingParams

        params = [
            SamplingParams(max_tokens=16, temperature=0.8, top_p=0.9, seed=1),
            SamplingParams(max_tokens=10, temperature=1.0, seed=2),
            SamplingParams(max_tokens=14, temperature=0.7, top_k=5, seed=3),
            SamplingParams(max_tokens=12, temperature=1.3, top_p=0.8, top_k=10, seed=4),
        ]
        engine = self._engine(_fixtures() / pair, max_num_seqs=3, page_size=4)
        self._drive(engine, _prompts(pair)[:4], params, emit)

    def _inside_block(self, pair: str, emit: Any) -> None:
        """A stop id, the target's eos and a budget, each at a token that an accepted block commits with more
        tokens after it in the same step: the end must cut the block there (test_gate_acceptance's stop and
        budget gates). The token is found from a free run's acceptance lengths, never assumed."""
        from runner import SamplingParams
        from verify.observe.refusals import scratch

        fixture, prompt = _fixtures() / pair, _prompts(pair)[0]
        (free,) = self._engine(fixture).generate([prompt], self._greedy(24))
        tokens, position, inside = list(free.token_ids), 1, []
        for accepted in free.acceptance_lengths:  # a step commits tokens [position, position + accepted)
            inside += [i for i in range(position, position + accepted - 1) if tokens[i] not in tokens[:i]]
            position += accepted
        emit(-1, -1, "free run", (tokens, list(free.acceptance_lengths)))
        if not inside:
            emit(-1, -1, "inside a block", "no step accepted two new tokens")  # the pristine run says so too
            return
        cut = inside[len(inside) // 2]
        emit(-1, -1, "inside a block", (cut, tokens[cut]))
        params = [self._greedy(24, stop_token_ids=(tokens[cut],)), self._greedy(cut + 1)]
        self._drive(self._engine(fixture, max_num_seqs=2), [prompt] * 2, params, emit)
        with scratch("dflash-observe-eos") as tmp:  # the same token as the target's eos
            folder = tmp / "fx"
            shutil.copytree(fixture, folder)
            config = folder / "target" / "config.json"
            config.write_text(json.dumps({**json.loads(config.read_text()), "eos_token_id": tokens[cut]}))
            params = [self._greedy(24), SamplingParams(max_tokens=24, ignore_eos=True)]
            self._drive(self._engine(folder, max_num_seqs=2), [prompt] * 2, params, emit)

    def _scaled(self, emit: Any) -> None:
        """A draft config with the output multiplier and soft-cap set (the shipped pairs leave both at rest)."""
        from runner import SamplingParams
        from verify.observe.refusals import scratch

        with scratch("dflash-observe-scaled") as tmp:
            folder = tmp / "fx"
            shutil.copytree(_fixtures() / "stride-dflash", folder)
            config = folder / "draft" / "config.json"
            cfg = json.loads(config.read_text())
            cfg["dflash_config"].update(output_multiplier=0.6, final_logit_softcapping=4.0)
            config.write_text(json.dumps(cfg))
            params = [self._greedy(12), SamplingParams(max_tokens=12, temperature=0.9, seed=5)]
            self._drive(self._engine(folder), _prompts("stride-dflash")[:2], params, emit)

    def _windowed(self, emit: Any, *, dense: bool) -> None:
        """A draft whose first layer is a sliding window of 2, not causal. The shipped drafts' layers are full and
        not causal, where the draft's mask reads no position at all: here the window's two comparisons and the
        query and key positions the mask is handed (paged and dense) decide what each block token sees."""
        from verify.observe.refusals import scratch

        with scratch("dflash-observe-windowed") as tmp:
            folder = tmp / "fx"
            shutil.copytree(_fixtures() / "stride-dflash", folder)
            config = folder / "draft" / "config.json"
            cfg = json.loads(config.read_text())
            cfg.update(layer_types=["sliding_attention", "full_attention"], sliding_window=2, is_causal=False)
            config.write_text(json.dumps(cfg))
            engine = self._engine(folder, max_num_seqs=3, page_size=4, draft_attention="dense" if dense else "paged")
            self._drive(engine, _prompts("stride-dflash")[1:4], [self._greedy(n) for n in (12, 9, 14)], emit)

    def _edges(self, emit: Any) -> None:
        """Budgets and stop tokens ending inside a block, a prefill token that ends its request, and plain
        decoding (no draft) of the same prompts."""
        fixture, prompts = _fixtures() / "stride-dflash", _prompts("stride-dflash")
        free_run = self._engine(fixture).generate(prompts[:1], self._greedy(12))[0].token_ids
        emit(-1, -1, "free run", free_run)
        params = [self._greedy(n) for n in (1, 2, 3, 6)]
        params += [self._greedy(12, stop_token_ids=(free_run[4],)), self._greedy(12, stop_token_ids=(free_run[0],))]
        self._drive(self._engine(fixture, max_num_seqs=6), [prompts[0]] * len(params), params, emit)
        plain = self._engine(fixture, draft=False)
        emit(-1, -1, "plain tokens", [o.token_ids for o in plain.generate(prompts[:3], self._greedy(12))])

    def _lifecycle(self, emit: Any) -> None:
        """Aborting a running and a queued request, then abort_all, then serving again."""
        from verify.observe.runner_hooks import record_state

        engine = self._engine(_fixtures() / "stride-dflash", max_num_seqs=2, page_size=4)
        prompts = _prompts("stride-dflash")
        ids = [engine.add_request(p, self._greedy(14)) for p in prompts[:4]]
        for _ in range(2):
            step = engine.num_steps
            record_state(engine, emit, step, engine.step(), 10**9)
        engine.abort(ids[0])
        engine.abort(ids[3])
        emit(engine.num_steps, -1, "aborted", [str(engine.output(i).finish_reason) for i in (ids[0], ids[3])])
        record_state(engine, emit, engine.num_steps, [], 10**9)
        while engine.has_unfinished():
            step = engine.num_steps
            record_state(engine, emit, step, engine.step(), 10**9)
        emit(-1, -1, "popped", [engine.pop_output(i).token_ids for i in ids])
        engine.add_request(prompts[4], self._greedy(14))
        engine.step()
        engine.abort_all()
        record_state(engine, emit, engine.num_steps, [], 10**9)
        emit(-1, -1, "after abort_all", [o.token_ids for o in engine.generate(prompts[5:7], self._greedy(10))])

    def _invariant(self, emit: Any) -> None:
        """The position invariant fed a store length one off, then a pending context one late."""
        engine = self._engine(_fixtures() / "stride-dflash", max_num_seqs=2)
        for prompt in _prompts("stride-dflash")[:2]:
            engine.add_request(prompt, self._greedy(14))
        engine.step()
        engine.step()
        rows = engine.rows
        for what, corrupt in (("store length + 1", 1), ("store length - 1", -1)):
            rows.store_lens[0] += corrupt
            emit(-1, 0, "invariant", (what, _outcome(lambda: engine.check_position_invariant(0))))
            rows.store_lens[0] -= corrupt
        emit(-1, 0, "invariant", ("intact", _outcome(lambda: engine.check_position_invariant(0))))

    def _refusals(self, emit: Any) -> None:
        from verify.observe.refusals import observe_refusals

        observe_refusals(_fixtures() / "stride-dflash", emit)


def _outcome(call: Callable[[], object]) -> str:
    """'accepted', or the exception's type and message (what a named refusal is judged by)."""
    try:
        call()
    except Exception as error:  # every kind is an observable here: which one is raised is the point
        return f"{type(error).__name__}: {error}"
    return "accepted"


def make_observer() -> RunnerObserver:
    return RunnerObserver()
