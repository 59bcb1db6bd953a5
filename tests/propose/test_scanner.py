"""The scanner (verify.propose.scanner) on small snippets: each spelling of each bug class is found and rewritten
as the class says; what could only crash, or would change nothing, is left out with the reason; the anchor
occurs once in the file and the replacement is the anchor with only the construct changed."""

from __future__ import annotations

import ast

import pytest

from verify.propose.edit import BugClass
from verify.propose.scanner import Proposal, scan_text

C = BugClass


def _changed(text: str, bug_class: BugClass) -> list[str]:
    proposals, _ = scan_text(text, "engine/x.py", (bug_class,))
    return [p.changed_line for p in proposals]


@pytest.mark.parametrize(
    ("bug_class", "source", "changed"),
    [
        (C.RATIO, "ratio = p[i, x] / q[i, x]\n", "ratio = q[i, x] / p[i, x]"),
        (C.RATIO, "ratio = torch.exp(log_p - log_q)\n", "ratio = torch.exp(log_q - log_p)"),
        (C.RATIO, "r = torch.log(p) - torch.log(q)\n", "r = torch.log(q) - torch.log(p)"),
        (C.RATIO, "keep = u * q_x < p_x\n", "keep = u * p_x < q_x"),
        (C.RATIO, "n = (u * qx < px).long().cumprod(0).sum()\n", "n = (u * px < qx).long().cumprod(0).sum()"),
        (C.RESIDUAL, "residual = target_probs - draft_probs\n", "residual = target_probs"),
        (C.RESIDUAL, "res = torch.clamp(p - q, min=0)\n", "res = torch.clamp(p, min=0)"),
        (C.RESIDUAL, "res = torch.clamp(p - q, min=0)\n", "res = (p - q)"),
        (C.RESIDUAL, "r = (p[i] - q[i]).clamp(min=0)\n", "r = (p[i] - q[i])"),
        (C.RESIDUAL, "r = max(p - q, 0)\n", "r = (p - q)"),
        (C.RESIDUAL, "residual = p.scatter_add(1, idx, -q)\n", "residual = p"),
        (C.ACCEPTANCE, "n = match.cumprod(dim=1).sum(dim=1)\n", "n = match.sum(dim=1)"),
        (C.ACCEPTANCE, "n = torch.cumprod(match, dim=0).sum()\n", "n = match.sum()"),
        (C.ACCEPTANCE, "n = ((~accepted).cumsum(-1) < 1).sum(-1)\n", "n = (accepted).sum(-1)"),
        (C.ACCEPTANCE, "n = (rejected.cumsum(-1) == 0).sum(-1)\n", "n = ((rejected) == 0).sum(-1)"),
        (
            C.ACCEPTANCE,
            "for d, t in zip(drafted, target):\n    if d != t:\n        break\n    accepted += 1\n",
            "continue",
        ),
        (C.ACCEPTANCE, "for i in range(k):\n    if u[i] > p[i] / q[i]:\n        break\n    n += 1\n", "continue"),
        (C.ACCEPTANCE, "for i in range(k):\n    if draft[i] != target[i]:\n        break\n", "continue"),
        (C.BONUS, "def accept(p, n):\n    return n, sample(p[n])\n", "return n, sample(p[n - 1])"),
        (C.BONUS, "def accept(p, n):\n    return n, sample(p[:, n, :])\n", "return n, sample(p[:, n - 1, :])"),
        (
            C.BONUS,
            "bonus = argmax.gather(1, accepted[:, None])\n",
            "bonus = argmax.gather(1, (accepted[:, None] - 1).clamp(min=0))",
        ),
        (C.POSITIONS, "positions = torch.arange(start, end)\n", "positions = torch.arange(start, end) + 1"),
        (C.POSITIONS, "out = model(ids, position_ids=positions)\n", "out = model(ids, position_ids=positions + 1)"),
        # Queries and keys rotated by two calls: an offset on one side moves every query-key distance.
        (
            C.POSITIONS,
            "q = rope(q, q_positions)\nk = rope(k, key_positions)\n",
            "q = rope(q, q_positions + 1)",
        ),
        (C.POSITIONS, "self._offsets = torch.arange(block)\n", "self._offsets = torch.arange(block) + 1"),
        (C.CACHE, "cache.crop(num_committed)\n", "cache.crop(num_committed + 1)"),
        (C.CACHE, "self.keys = self.keys[:, :, :length]\n", "self.keys = self.keys[:, :, :length + 1]"),
        (C.CACHE, "self.k_cache[start:end] = k\n", "self.k_cache[start + 1:end + 1] = k"),
        (C.CACHE, "self.kv[:, :, start:end] = kv\n", "self.kv[:, :, start + 1:end + 1] = kv"),
        (C.CACHE, "cache[pos] = kv\n", "cache[pos + 1] = kv"),
        (C.MASK, "out = sdpa(q, k, v, is_causal=layer.is_causal)\n", "out = sdpa(q, k, v, is_causal=True)"),
        (C.MASK, "out = sdpa(q, k, v, is_causal=True)\n", "out = sdpa(q, k, v, is_causal=False)"),
        (C.MASK, "mask = torch.tril(ones)\n", "mask = torch.tril(ones, diagonal=1)"),
        (C.MASK, "mask = torch.triu(ones, diagonal=1)\n", "mask = torch.triu(ones, diagonal=2)"),
        (C.MASK, "mask = ones.tril()\n", "mask = ones.tril(diagonal=1)"),
        (C.MASK, "self.causal = config.causal\n", "self.causal = not config.causal"),
        (C.MASK, "valid = key_pos < lens[:, None]\n", "valid = key_pos <= lens[:, None]"),
        (C.MASK, "if is_causal:\n    x = 1\n", "if not is_causal:"),
        (C.SOFTMAX, "probs = torch.softmax(scores, dim=-1)\n", "probs = torch.softmax(scores, dim=-2)"),
        (C.SOFTMAX, "probs = scores.softmax(-1)\n", "probs = scores.softmax(-2)"),
        (C.TEMPERATURE, "scores = logits / temperature\n", "scores = logits"),
        (C.TEMPERATURE, "scores = logits / temperature\n", "scores = logits / temperature / temperature"),
        (C.TEMPERATURE, "q = probs_of(logits, p.temperature, p.top_p)\n", "q = probs_of(logits, 1.0, p.top_p)"),
        (C.TEMPERATURE, "q = probs_of(logits, temperature=t)\n", "q = probs_of(logits, temperature=1.0)"),
        (C.FILTERS, "q = probs_of(logits, t, p.top_p, p.top_k)\n", "q = probs_of(logits, t)"),
        (C.FILTERS, "q = probs_of(logits, t, top_k=k)\n", "q = probs_of(logits, t)"),
        (C.FILTERS, "if 0 < top_k < vocab:\n    x = f(x)\n", "if False:"),
    ],
    ids=lambda v: v.value if isinstance(v, BugClass) else None,
)
def test_each_spelling_is_found_and_rewritten(bug_class: BugClass, source: str, changed: str) -> None:
    assert changed in _changed(source, bug_class)


@pytest.mark.parametrize(
    ("bug_class", "source", "reason"),
    [
        (C.POSITIONS, "record(positions=(start, end))\n", "a tuple plus one can only crash"),
        (C.CACHE, "self.keys = self.keys[:, :-k]\n", "keeps nothing when it is -1"),
        (C.CACHE, "self.cache[a:b:2] = kv\n", "has a step"),
        (C.POSITIONS, "self.pending_positions = [None] * max_rows\n", "built from a sequence literal"),
    ],
)
def test_what_could_only_crash_is_left_out_with_the_reason(bug_class: BugClass, source: str, reason: str) -> None:
    proposals, refused = scan_text(source, "engine/x.py", (bug_class,))
    assert not proposals and any(reason in r.reason for r in refused), refused


@pytest.mark.parametrize(
    "source",
    [
        # The file's one rotary call rotates queries and keys (and the keys it caches) alike.
        "def forward(self, h, positions, cache):\n    cos, sin = self.rotary(positions, h.dtype)\n"
        "    q, k = rotate(self.q(h), cos, sin), rotate(self.k(h), cos, sin)\n    return attend(q, cache.write(k))\n",
        "def forward(self, x, position_ids):\n    cos, sin = self.rotary_emb(x, position_ids=position_ids)\n"
        "    return apply(x, cos, sin)\n",
        # Inside the rotary embedding's own code (its cache's edge branches, its bound).
        "class RotaryEmbedding:\n    def forward(self, positions, dtype):\n        if not positions.numel():\n"
        "            return self.angles(positions, dtype)\n        low, high = torch.aminmax(positions)\n"
        "        if low < 0:\n            return self.angles(positions, dtype)\n        return self.table[positions]\n",
    ],
    ids=["one-rotary-call", "one-rotary-call-keyword", "inside-rotary"],
)
def test_an_offset_rotary_embeddings_cannot_see_is_left_out_with_the_reason(source: str) -> None:
    """RoPE's scores depend on a query's position minus a key's: an offset added to every position one rotary call
    rotates cancels. Proposed, these mutants survived with no divergence (equivalent)."""
    proposals, refused = scan_text(source, "engine/x.py", (C.POSITIONS,))
    assert not proposals, [p.changed_line for p in proposals]
    assert refused and all("RoPE's scores see only" in r.reason for r in refused), refused
    # Positions that also feed something else (cache slots, a mask) are still proposed where that use is.
    also = source.replace("def forward(self, h, positions, cache):\n", "def forward(self, h, positions, cache):\n"
                          "    slots = cache.slots(positions)\n")  # fmt: skip
    if also != source:
        assert [p.changed_line for p in scan_text(also, "engine/x.py", (C.POSITIONS,))[0]] == [
            "slots = cache.slots(positions + 1)"
        ]


def test_positions_that_fill_a_cache_allocated_beside_them_are_not_offset() -> None:
    """One past [0, n) in a scratch cache of n slots indexes out of its bounds: proposed, both mutants crashed."""
    text = (
        "def full_forward(target, ids):\n    rows, length = ids.shape\n"
        "    cache = PagedKVCache(layers, rows, length, heads)\n"
        "    positions = torch.arange(length, device=ids.device).expand(rows, length)\n"
        "    return target(Inputs(ids, positions), cache)\n"
    )
    proposals, refused = scan_text(text, "engine/x.py", (C.POSITIONS,))
    assert not proposals, [p.changed_line for p in proposals]
    assert len(refused) == 2 and all("out of its bounds" in r.reason for r in refused), refused
    # Sized apart from the cache, or arithmetic on the range (left padding): a shifted encoding, proposed.
    apart = text.replace("PagedKVCache(layers, rows, length, heads)", "PagedKVCache(layers, rows, 2 * length, heads)")
    assert len(_changed(apart, C.POSITIONS)) == 2
    padded = text.replace(".expand(rows, length)", "[None] - pads[:, None]")
    assert len(_changed(padded, C.POSITIONS)) == 2


def test_a_validity_test_beside_a_causal_flag_keeps_its_strictness() -> None:
    """`k_pos < lens` ANDed with causality: the key at the length is past every query, which causality hides
    already (proposed, `<=` survived with no divergence). Without the flag the same flip is proposed."""
    text = "mask = attention_mask(q_pos, k_pos, k_pos < seq_lens[:, None], is_causal=True, window=None)\n"
    proposals, refused = scan_text(text, "engine/x.py", (C.MASK,))
    # The flag itself forced off is still a bug to propose; the validity test's strictness is not.
    assert [p.changed_line for p in proposals] == [text.strip().replace("is_causal=True", "is_causal=False")]
    assert any("is_causal=True" in r.reason for r in refused), refused
    flagged = text.replace("is_causal=True", "is_causal=layer.is_causal")
    assert flagged.strip().replace("k_pos < seq_lens", "k_pos <= seq_lens") in _changed(flagged, C.MASK)


def test_a_loop_that_checks_parameters_versions_is_not_an_acceptance_loop() -> None:
    """`p._version` reads a parameter's version, not a probability p: the loop's break stops a cache-validity
    check (proposed, `continue` there survived with no divergence: the weights never change in a run)."""
    text = (
        "def get(self):\n    for p, (ptr, version) in zip(self._params, self._key):\n"
        "        if p._version != version or p.data_ptr() != ptr:\n            break\n    else:\n"
        "        return self._stacked\n    return self._stack()\n"
    )
    assert _changed(text, C.ACCEPTANCE) == []
    assert _changed(text.replace("p._version != version", "u > p[0] / q[0]"), C.ACCEPTANCE) == ["continue"]


def test_a_residual_drawn_by_multinomial_keeps_its_clamp() -> None:
    # Without the clamp, p - q has negative entries and multinomial raises: that mutant could only crash. The
    # draft dropped from the residual is still a bug the gates can see.
    text = "def resample(p, q, g):\n    r = (p - q).clamp(min=0)\n    return torch.multinomial(r, 1, generator=g)\n"
    proposals, refused = scan_text(text, "engine/x.py", (C.RESIDUAL,))
    assert [p.changed_line for p in proposals] == ["r = (p).clamp(min=0)"]
    assert any("could only crash" in r.reason for r in refused), refused


def test_a_rewrite_that_changes_no_syntax_tree_is_not_proposed() -> None:
    proposals, refused = scan_text("r = p / q  # the ratio\nr = (p) / (q)\n", "engine/x.py", (C.RATIO,))
    assert len(proposals) == 2 and len({p.anchor for p in proposals}) == 2
    # The same construct twice: each anchor is widened until it occurs once.
    twice = "def f(p, q):\n    x = 1\n    return p / q\n\n\ndef g(p, q):\n    x = 2\n    return p / q\n"
    proposals, _ = scan_text(twice, "engine/x.py", (C.RATIO,))
    assert [p.anchor for p in proposals] == ["x = 1\n    return p / q", "x = 2\n    return p / q"]


def test_unrelated_code_is_left_alone() -> None:
    text = (
        "def mean(values, total):\n    return sum(values) / total\n\n\n"
        "def check(top_p):\n    if not 0 < top_p <= 1:\n        raise ValueError(top_p)\n"
        "    rows[dst] = rows[src]\n    return len(values)\n"
    )
    proposals, _ = scan_text(text, "engine/x.py")
    assert proposals == [], [p.changed_line for p in proposals]


@pytest.mark.parametrize(
    "source",
    [
        # The decoding loop around the rule: it stops at the end-of-sequence token, not at a rejected draft.
        "while len(out) < max_new_tokens:\n    drafted = drafter.propose(tokens)\n    n = accept(drafted)\n"
        "    out += drafted[:n]\n    if eos_id in out:\n        break\n",
        # A scheduler: admission stops at a full pool (the draft's pool named in the body, not the loop's header).
        "while self.waiting and self.num_running < self.max_rows:\n    need = self.pages_needed(self.waiting[0])\n"
        "    if need > self.target_pool.num_free:\n        break\n"
        "    if self.draft_pool is not None and need > self.draft_pool.num_free:\n        break\n",
        # A config record: a filter's size stored, not a distribution filtered (on neither model's side).
        "def load(cls, read):\n    return cls(shapes, selector_top_k=size('selector_top_k'), top_p=read('top_p'))\n",
        # A bound on positions, not position ids: one past it moves only where a request is refused.
        "max_position_embeddings = read.integer('max_position_embeddings', 4096)\n"
        "ids = check(prompt, vocab_size, max_position_embeddings)\n",
        # A read of the cache whose length the mask shares: one more key than the mask has columns only crashes.
        "keys, values = cache.keys[: cache.length], cache.values[: cache.length]\n"
        "store_before = self.rows.store_lens[:num_rows]\n",
    ],
    ids=["plain-decoding", "scheduler", "config-record", "position-limit", "cache-read"],
)
def test_code_outside_the_classes_is_not_proposed(source: str) -> None:
    proposals, _ = scan_text(source, "engine/x.py")
    assert proposals == [], [p.changed_line for p in proposals]


def test_every_proposal_is_its_anchor_with_the_construct_changed_and_parses() -> None:
    text = "def accept(p, q, n):\n    ratio = p / q\n    positions = torch.arange(n)\n    return n, sample(p[n])\n"
    proposals, _ = scan_text(text, "engine/x.py")
    assert {p.bug_class for p in proposals} >= {C.RATIO, C.POSITIONS, C.BONUS}
    for proposal in proposals:
        assert isinstance(proposal, Proposal) and text.count(proposal.anchor) == 1
        ast.parse(text.replace(proposal.anchor, proposal.replacement))
        assert proposal.line == text[: text.index(proposal.anchor)].count("\n") + 1


def test_a_file_that_does_not_parse_is_one_refusal() -> None:
    proposals, refused = scan_text("def f(:\n", "engine/x.py")
    assert not proposals and "does not parse" in refused[0].reason
