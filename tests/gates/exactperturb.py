"""Perturbations of the acceptance rule and of the distributions handed to it, for the power checks only: none
of this is shipped in the runner. Each moves one term of the closed form (exactrule.py) by a stated amount:

- an acceptance probability: position i accepts with max(0, min(1, p/q) - eps) instead of min(1, p/q);
- a residual: after a rejection at position i the token comes from (1 - eps) res_i + eps p_i;
- the bonus: (1 - eps) p_n + eps q_{n-1} (eps = 1: the bonus drawn from q);
- the joint dependence: with probability eps every position reuses position 0's uniform;
- a temperature: p (or q) computed at T * (1 + eps) where the other side uses T;
- a filter: p filtered without renormalising, filtered before the temperature is applied, or with top-k
  applied after top-p.

`KnobRule` is a second, independent implementation of the rule whose knobs are these terms: with every knob
at 0 it is the closed form (the power checks run that control too), so a detection is the knob's doing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class KnobRule:
    accept_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)  # eps subtracted from position i's min(1, p/q)
    residual_mix: tuple[float, float, float] = (0.0, 0.0, 0.0)  # eps of p_i mixed into position i's residual
    bonus_mix: float = 0.0  # eps of q_{n-1} mixed into the bonus law p_n
    shared_uniform: float = 0.0  # probability that all positions reuse one uniform

    def __call__(self, drafted, target_probs, draft_probs, draft_indices, generator):
        tokens = torch.as_tensor(drafted, dtype=torch.long)
        n, vocab = tokens.numel(), target_probs.shape[-1]
        if n == 0 or draft_probs is None:
            return torch.tensor(0), torch.multinomial(target_probs[0], 1, generator=generator)[0]
        p_all = target_probs.double()
        if draft_indices is None:
            q_all = draft_probs.double()
        else:
            q_all = torch.zeros(n, vocab, dtype=torch.float64).scatter_add(1, draft_indices, draft_probs.double())
        p = p_all[:n].gather(1, tokens[:, None])[:, 0]
        q = q_all.gather(1, tokens[:, None])[:, 0]
        ratio = torch.where(q > 0, (p / q.clamp_min(1e-300)).clamp(max=1), (p > 0).double())
        ratio = (ratio - torch.tensor(self.accept_shift[:n], dtype=torch.float64)).clamp_min(0)
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        if float(torch.rand((), generator=generator)) < self.shared_uniform:
            u = u[:1].expand(n)
        accepted = int((u < ratio).long().cumprod(0).sum())
        if accepted == n:
            law = (1 - self.bonus_mix) * p_all[n] + self.bonus_mix * q_all[n - 1]
        else:
            residual = (p_all[accepted] - q_all[accepted]).clamp_min(0)
            residual = residual / residual.sum() if residual.sum() > 0 else p_all[accepted]
            mix = self.residual_mix[accepted]
            law = (1 - mix) * residual + mix * p_all[accepted]
        return torch.tensor(accepted), torch.multinomial(law.float(), 1, generator=generator)[0]


def filtered(
    logits: torch.Tensor,
    temperature: float,
    top_p: float = 1.0,
    top_k: int = 0,
    *,
    renormalise: bool = True,
    filter_temperature: float | None = None,
    top_k_last: bool = False,
) -> torch.Tensor:
    """softmax(logits / T) with top-k then top-p, in float64, with three ways of getting it wrong: the kept mass
    not renormalised, the kept set chosen at `filter_temperature` (the temperature applied after the filter), or
    top-k applied after top-p."""
    probs = torch.softmax(logits.double() / temperature, -1)
    chooser = probs if filter_temperature is None else torch.softmax(logits.double() / filter_temperature, -1)
    vocab = probs.shape[-1]
    keep_k = torch.ones_like(probs, dtype=torch.bool)
    if 0 < top_k < vocab:
        keep_k = torch.zeros_like(keep_k).scatter(-1, chooser.topk(top_k, dim=-1).indices, True)
    base = chooser if top_k_last else torch.where(keep_k, chooser, 0) / torch.where(keep_k, chooser, 0).sum(-1, True)
    ordered, order = base.sort(-1, descending=True)
    keep_p = torch.zeros_like(keep_k).scatter(-1, order, ordered.cumsum(-1) - ordered < top_p)
    kept = torch.where(keep_k & keep_p, probs, 0)
    return (kept / kept.sum(-1, keepdim=True) if renormalise else kept).float()


def tempered(factor: float, *, only_blocks: bool = False):
    """A sampling_probs that applies the temperature times `factor` (only to [n, V] blocks: the verify step's
    p, not the prefill's [V] row, when `only_blocks`)."""

    def probs(logits, temperature, top_p=1.0, top_k=0):
        scale = factor if logits.dim() == 2 or not only_blocks else 1.0
        return filtered(logits, temperature * scale, top_p, top_k)

    return probs
