"""One request's state: its ids, sampling params, committed length and pages. No torch tensors live here
except the request's private RNG.

Invariant kept by the engine: len(token_ids) == num_committed + 1. The last id is the anchor, the committed
token whose K/V the target has not computed yet; num_committed (L) is the target cache's length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runner.compat import StrEnum
from runner.engine_config import GenerationOutput
from runner.errors import InvalidRequestError

if TYPE_CHECKING:
    import torch

    from runner.sampling import SamplingParams


class FinishReason(StrEnum):
    LENGTH = "length"
    STOP = "stop"  # a stop id or the target's eos
    ABORT = "abort"


@dataclass(slots=True)
class Request:
    request_id: int
    prompt_ids: list[int]
    params: SamplingParams
    token_ids: list[int] = field(default_factory=list)
    num_committed: int = 0
    acceptance_lengths: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    target_pages: list[int] = field(default_factory=list)
    draft_pages: list[int] = field(default_factory=list)
    generator: torch.Generator | None = None
    stop_ids: frozenset[int] = frozenset()  # the params' stop ids plus the target's eos unless ignored

    def __post_init__(self) -> None:
        if not self.token_ids:
            self.token_ids = list(self.prompt_ids)
        if not self.stop_ids:
            self.stop_ids = frozenset(self.params.stop_token_ids)

    @property
    def num_prompt(self) -> int:
        return len(self.prompt_ids)

    @property
    def max_length(self) -> int:
        """Prompt plus generation budget: the request never holds more tokens than this."""
        return self.num_prompt + self.params.max_tokens

    @property
    def generated_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt :]

    @property
    def anchor(self) -> int:
        return self.token_ids[self.num_committed]

    @property
    def is_finished(self) -> bool:
        return self.finish_reason is not None

    def to_output(self) -> GenerationOutput:
        return GenerationOutput(
            self.request_id,
            tuple(self.prompt_ids),
            tuple(self.generated_ids),
            tuple(self.acceptance_lengths),
            str(self.finish_reason or FinishReason.LENGTH),
        )

    def commit(self, new_ids: list[int]) -> int:
        """Appends up to len(new_ids) tokens after the anchor, cut at the budget and after a stop token.

        Returns how many were committed (the step's acceptance length).
        """
        produced = min(len(new_ids), self.max_length - self.num_committed - 1)
        for i, token in enumerate(new_ids[:produced]):
            if token in self.stop_ids:
                produced = i + 1
                self.finish_reason = FinishReason.STOP
                break
        self.token_ids.extend(new_ids[:produced])
        self.num_committed += produced
        if self.finish_reason is None and self.num_committed + 1 >= self.max_length:
            self.finish_reason = FinishReason.LENGTH
        return produced

    def start(self, first_token: int) -> None:
        """After prefill: the prompt is committed and the first sampled token becomes the anchor."""
        self.num_committed = self.num_prompt
        self.token_ids.append(first_token)
        if first_token in self.stop_ids:
            self.finish_reason = FinishReason.STOP
        elif self.num_committed + 1 >= self.max_length:
            self.finish_reason = FinishReason.LENGTH


def check_request(prompt_ids: object, params: SamplingParams, vocab_size: int, max_positions: int) -> list[int]:
    """The prompt as a list of ids, or InvalidRequestError naming what is wrong. Plain Python: no state."""
    if isinstance(prompt_ids, str | bytes) or not isinstance(prompt_ids, list | tuple):
        raise InvalidRequestError(f"a prompt must be a list of token ids, got {type(prompt_ids).__name__}")
    ids = list(prompt_ids)
    if not ids:
        raise InvalidRequestError("empty prompt")
    if any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab_size for t in ids):
        raise InvalidRequestError(f"prompt ids must be integers in [0, {vocab_size})")
    bad_stops = [t for t in params.stop_token_ids if t >= vocab_size]
    if bad_stops:
        raise InvalidRequestError(f"stop_token_ids {bad_stops} are outside the vocab [0, {vocab_size})")
    if len(ids) + params.max_tokens > max_positions:
        raise InvalidRequestError(
            f"prompt ({len(ids)} tokens) + max_tokens ({params.max_tokens}) exceeds the model's context "
            f"({max_positions})"
        )
    return ids
