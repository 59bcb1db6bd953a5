"""This engine's mutations: the bug classes of a speculative decoder, most made from dflash-verify's templates
(imported from verify) with an anchor copied from the source. `dflash mutations show NAME` prints each diff."""

from verify import (
    Mutation,
    acceptance_past_first_mismatch,
    bonus_off_by_one,
    cache_crop_off_by_one,
    cache_write_shifted,
    position_offset,
    ratio_inverted,
    register,
    residual_not_subtracting_draft,
)

ACCEPT = "lookupspec/accept.py"
MODEL = "lookupspec/model.py"

register(
    ratio_inverted(ACCEPT, "ratio = p[i, x] / q[i, x]"),
    residual_not_subtracting_draft(ACCEPT, "residual = (p[i] - q[i]).clamp(min=0)"),
    bonus_off_by_one(ACCEPT, "return n, int(torch.multinomial(p[n], 1, generator=generator))"),
    acceptance_past_first_mismatch("lookupspec/greedy.py", "if d != t:\n            break"),
    cache_crop_off_by_one("lookupspec/engine.py", "cache.crop(len(tokens) + accepted)"),
    cache_write_shifted(MODEL, "self.keys[self.length : end] = keys"),
    position_offset(MODEL, "positions = (torch.arange(width)[None] - pads[:, None]).clamp(min=0)"),
    # Not a template: the drafter looks one token back. Every output stays right (the verify corrects it);
    # only the drafted blocks and the acceptance rate change.
    Mutation(
        name="drafter-context-one-back",
        bug_class="The n-gram drafter matches the n tokens before the last one instead of the last n.",
        file="lookupspec/drafter.py",
        anchor="context = tokens[-self.n :]",
        replacement="context = tokens[-self.n - 1 : -1]",
    ),
)
