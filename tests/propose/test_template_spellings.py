"""The templates (verify.templates) read the spellings the scanner reads (their rewrites are its rules), and refuse,
with the reason, what they cannot mutate correctly: a keyword argument's continuation line is a keyword, not a
one-tuple (`positions,` plus one could only crash), and a crop `[:-k]` is refused (`[:(-k) + 1]` keeps nothing
when k = 1)."""

from __future__ import annotations

import pytest

from verify import templates
from verify.templates import TemplateError


@pytest.mark.parametrize(
    ("make", "anchor", "replacement"),
    [
        (templates.position_offset, "position_ids=positions,", "position_ids=positions + 1,"),
        (
            templates.position_offset,
            "            position_ids=pos_ids,  # [R, T]",
            "            position_ids=pos_ids + 1,  # [R, T]",
        ),
        (templates.ratio_inverted, "ratio = torch.exp(logp_x - logq_x)", "ratio = torch.exp(logq_x - logp_x)"),
        (
            templates.ratio_inverted,
            "accepted = (u * q < p).cumprod(0).sum()",
            "accepted = (u * p < q).cumprod(0).sum()",
        ),
        (
            templates.acceptance_past_first_mismatch,
            "n = ((~accepted).cumsum(-1) < 1).sum(-1)",
            "n = (accepted).sum(-1)",
        ),
        (templates.bonus_off_by_one, "token = sample(p[:, n, :])", "token = sample(p[:, n - 1, :])"),
        (templates.cache_write_shifted, "self.k[:, :, start:end] = k", "self.k[:, :, start + 1:end + 1] = k"),
        (templates.cache_crop_off_by_one, "k = k[:, :n_keep]", "k = k[:, :n_keep + 1]"),
        (templates.residual_not_subtracting_draft, "residual = torch.relu(p - q)", "residual = torch.relu(p)"),
    ],
)
def test_a_template_reads_the_scanners_spellings(make, anchor: str, replacement: str) -> None:
    assert make("engine/x.py", anchor, name="a-bug").replacement == replacement


@pytest.mark.parametrize(
    ("make", "anchor", "reason"),
    [
        (templates.position_offset, "positions=(start, end),", "a tuple plus one can only crash"),
        (templates.position_offset, "positions = start, end", "a tuple plus one can only crash"),
        (templates.cache_crop_off_by_one, "k = k[:-num_rejected]", "keeps nothing when it is -1"),
        (templates.cache_crop_off_by_one, "k = k[:, :-1]", "keeps nothing when it is -1"),
    ],
)
def test_what_a_template_cannot_mutate_correctly_is_refused_with_the_reason(make, anchor: str, reason: str) -> None:
    with pytest.raises(TemplateError, match=f"cannot be mutated: .*{reason}"):
        make("engine/x.py", anchor, name="a-bug")
