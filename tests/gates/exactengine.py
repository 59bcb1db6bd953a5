"""The engine-level exact gates' machinery: a tiny pair, the exact law of the first output tokens of plain
sampling, and the engine's samples counted in the same cells.

The pair. The shipped fixtures have 48 tokens: three tokens make 110,592 cells. The exact gates use a pair of
8 tokens built by the project's synthetic builder (verify/fixtures/synthetic.py, seeded random weights: the same
files on every run) into a temporary folder. It is not a trained fixture on purpose: a trained pair is sure of
its continuation, while exactness is seen where the target's law is wide and the draft is often rejected. The
DFlash and DFlash2 pairs share their target (same seed and shapes). No end-of-sequence id: every request runs
to its budget.

The law. Token 1 comes from prefill, p(. | prompt); tokens 2 and 3 from the first verify steps. Plain sampling
gives P(t1, t2, t3) = p(t1 | prompt) p(t2 | prompt t1) p(t3 | prompt t1 t2), each p the target's tempered,
filtered distribution, enumerated with the independent dense reference (one forward per (t1, t2) gives all
three rows). Speculative decoding is lossless exactly when its samples follow this law: the acceptance rule's
joint law, the q the rule gets, the bonus, the temperature and the filters all show in it.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from dense_reference import Checkpoint, filtered_probs, target_forward

from runner import Engine, EngineConfig, SamplingParams
from verify import FitResult, law_power, pearson_fit, sequence_counts
from verify.fixtures.synthetic import PairSpec, write_pair
from verify.gatekit.sampling import cell_tokens

VOCAB = 8
NUM_TOKENS = 3
PROMPTS = ((1, 4, 2), (6, 0, 3, 5), (2, 7, 7))


def pair_spec(kind: str) -> PairSpec:
    return PairSpec(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_target_layers=2,
        num_draft_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        block_size=4,
        target_layer_ids=(0, 1),
        seed=5,
        init_std=0.3,  # wide enough that p is neither uniform nor one-hot at T = 0.6..3
        kind=kind,
        conv_group_size=16,
        selector_rank=8,
        selector_top_k=4,
    )


_PAIRS: dict[str, Path] = {}


def tiny_pair(kind: str) -> Path:
    """The pair's folder, written once per test process into a temporary folder. Only the process that wrote it
    removes it at exit: a forked child (mutmut's, or the harness's) reads its parent's folder and leaves it."""
    root = _PAIRS.get(kind)
    if root is None or not (root / "draft" / "model.safetensors").is_file():
        root = Path(tempfile.mkdtemp(prefix="dflash-exact-"))
        atexit.register(_remove_if_owner, root, os.getpid())
        write_pair(root, pair_spec(kind))
        _PAIRS[kind] = root
    return root


def _remove_if_owner(root: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(root, ignore_errors=True)


@functools.cache
def cached_prefix_logits(prompt: tuple[int, ...]) -> torch.Tensor:
    return prefix_logits(Checkpoint(tiny_pair("dflash") / "target"), prompt)


@dataclass(frozen=True, slots=True)
class Setting:
    """One engine configuration whose first NUM_TOKENS output tokens are tested."""

    kind: str  # "dflash" or "dflash2"
    temperature: float
    top_p: float = 1.0
    top_k: int = 0
    block_size: int = 3  # 3: two drafted tokens per first verify step; 2: one, and its bonus is emitted
    prompt: tuple[int, ...] = PROMPTS[0]
    seed: int = 0

    @property
    def id(self) -> str:
        filters = "" if self.top_p == 1.0 and self.top_k == 0 else f"-top-p{self.top_p}-top-k{self.top_k}"
        return f"{self.kind}-t{self.temperature}{filters}-block{self.block_size}"


def prefix_logits(target: Checkpoint, prompt: tuple[int, ...]) -> torch.Tensor:
    """[V, V, 3, V]: for each (t1, t2) the target's logits after prompt, prompt t1 and prompt t1 t2."""
    out = torch.empty(VOCAB, VOCAB, NUM_TOKENS, VOCAB)
    start = len(prompt) - 1
    for t1, t2 in itertools.product(range(VOCAB), repeat=2):
        logits, _ = target_forward(target, [*prompt, t1, t2])
        out[t1, t2] = logits[start : start + NUM_TOKENS]
    return out


def output_law(logits: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
    """P(t1, t2, t3) of plain sampling as [V, V, V] (float64) from prefix_logits' tensor."""
    probs = filtered_probs(logits.reshape(-1, VOCAB), temperature, top_p, top_k).double()
    probs = (probs / probs.sum(-1, keepdim=True)).view(VOCAB, VOCAB, NUM_TOKENS, VOCAB)
    first = probs[0, 0, 0]  # p(t1 | prompt): the same in every row
    second = probs[:, 0, 1]  # [t1, t2]
    third = probs[:, :, 2]  # [t1, t2, t3]
    return first[:, None, None] * second[:, :, None] * third


def engine_counts(folder: Path, setting: Setting, num_draws: int, solo: bool) -> torch.Tensor:
    """The engine's first NUM_TOKENS tokens of `num_draws` seeded requests, counted per (t1, t2, t3) cell.

    Batched: up to 256 rows decode together (rows join and leave as requests finish). Solo: one row at a time.
    """
    rows = 1 if solo else 256
    config = EngineConfig(max_num_seqs=rows, page_size=4, num_pages=4 * rows + 8, block_size=setting.block_size)
    engine = Engine.from_pretrained(folder / "target", folder / "draft", config=config)
    params = [
        SamplingParams(
            max_tokens=NUM_TOKENS,
            temperature=setting.temperature,
            top_p=setting.top_p,
            top_k=setting.top_k,
            seed=setting.seed * 1_000_003 + i,
            ignore_eos=True,
        )
        for i in range(num_draws)
    ]
    ids = [engine.add_request(list(setting.prompt), p) for p in params]
    _drain(engine, num_draws, setting.id)
    outs = [engine.output(i) for i in ids]
    tokens = torch.tensor([o.token_ids for o in outs])
    if tokens.shape != (num_draws, NUM_TOKENS):
        raise AssertionError(f"{setting.id}: the engine returned {tokens.shape} tokens, not {NUM_TOKENS} per request")
    steps = [a for o in outs for a in o.acceptance_lengths]
    if not steps or max(steps) < 2 or min(steps) > 1:
        raise AssertionError(f"{setting.id}: acceptance lengths {sorted(set(steps))}: the rule was never exercised")
    return sequence_counts(tokens, VOCAB)


def _drain(engine: Engine, num_requests: int, what: str) -> None:
    """Step until every request is done. A liveness bound, not a timer: every step commits a token to each running
    row, so a healthy engine is done within num_requests * (NUM_TOKENS + 1) steps. One that stops admitting (its
    freed pages leaked) would loop until the harness's budget and read as a hang; the gate names it instead."""
    limit, steps = num_requests * (NUM_TOKENS + 1) + 16, 0
    while engine.has_unfinished():
        if steps == limit:
            raise AssertionError(f"{what}: the engine made no progress: requests unfinished after {limit} steps")
        engine.step()
        steps += 1


def mixed_counts(
    kind: str, settings: tuple[Setting, ...], greedy_prompt: tuple[int, ...], num_draws: int
) -> tuple[list[torch.Tensor], list[tuple[int, ...]]]:
    """One batch whose rows differ: `num_draws` requests of each sampled setting (its own temperature, filters,
    prompt and seeds) and num_draws // 4 greedy requests of `greedy_prompt`, interleaved, so that every decode
    step holds rows of every kind side by side. Returns each setting's cell counts and the greedy outputs."""
    block = {s.block_size for s in settings}
    assert len(block) == 1, "one engine, one verify block"
    rows = 256
    config = EngineConfig(max_num_seqs=rows, page_size=4, num_pages=4 * rows + 8, block_size=block.pop())
    folder = tiny_pair(kind)
    engine = Engine.from_pretrained(folder / "target", folder / "draft", config=config)
    groups: list[list[int]] = [[] for _ in settings]
    greedy: list[int] = []
    for i in range(num_draws):
        for group, s in zip(groups, settings, strict=True):
            params = SamplingParams(max_tokens=NUM_TOKENS, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                                    seed=s.seed * 1_000_003 + i, ignore_eos=True)  # fmt: skip
            group.append(engine.add_request(list(s.prompt), params))
        if i % 4 == 0:
            params = SamplingParams(max_tokens=NUM_TOKENS, temperature=0.0, ignore_eos=True)
            greedy.append(engine.add_request(list(greedy_prompt), params))
    _drain(engine, num_draws * len(settings) + len(greedy), f"mixed {kind}")
    counts = []
    for group, s in zip(groups, settings, strict=True):
        tokens = torch.tensor([engine.output(i).token_ids for i in group])
        if tokens.shape != (num_draws, NUM_TOKENS):
            raise AssertionError(f"mixed {s.id}: {tokens.shape} tokens, not {NUM_TOKENS} per request")
        counts.append(sequence_counts(tokens, VOCAB))
    return counts, [tuple(engine.output(i).token_ids) for i in greedy]


def greedy_continuation(prompt: tuple[int, ...]) -> tuple[int, ...]:
    """The first NUM_TOKENS tokens of greedy decoding, from the dense reference's logits."""
    logits = cached_prefix_logits(prompt)
    t1 = int(logits[0, 0, 0].argmax())
    t2 = int(logits[t1, 0, 1].argmax())
    return t1, t2, int(logits[t1, t2, 2].argmax())


def setting_law(setting: Setting) -> torch.Tensor:
    return output_law(cached_prefix_logits(setting.prompt), setting.temperature, setting.top_p, setting.top_k)


def engine_fit(setting: Setting, num_draws: int, alpha: float, solo: bool) -> FitResult:
    """The gates' core: the engine's samples against the exact law (power tests call it with a patched runner)."""
    counts = engine_counts(tiny_pair(setting.kind), setting, num_draws, solo)
    return pearson_fit(counts, setting_law(setting).flatten(), alpha)


def setting_power(setting: Setting, num_draws: int, alpha: float) -> float:
    """The total-variation distance the setting's test detects with probability >= 0.99 (no engine run)."""
    return law_power(setting_law(setting), num_draws, alpha)


def describe(setting: Setting, fit: FitResult, solo: bool) -> str:
    t1, t2, t3 = cell_tokens(fit.worst_cell, VOCAB, NUM_TOKENS)
    return (
        f"{'solo' if solo else 'batched'} {setting.id}, prompt {setting.prompt}: X^2 {fit.statistic:.1f} on {fit.df} "
        f"df, p-value {fit.p_value:.2e} (level {fit.alpha:.1e}), {fit.impossible} draws of probability 0; worst "
        f"cell: tokens ({t1}, {t2}, {t3})"
    )
