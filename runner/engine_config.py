"""The engine's settings and its per-request result: leaf records, validated on construction."""

from __future__ import annotations

from dataclasses import dataclass

from runner.errors import InvalidRequestError

DRAFT_ATTENTION = ("paged", "dense")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    max_num_seqs: int = 16
    page_size: int = 16
    num_pages: int = 256  # per pool (target cache and draft store each)
    block_size: int | None = None  # None: the draft's own block size
    # "dense": recompute context K/V from every committed feature (no store). Only ever used when asked for.
    draft_attention: str = "paged"
    trace: bool = False

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "page_size", "num_pages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidRequestError(f"EngineConfig.{name} must be an integer >= 1, got {value!r}")
        size = self.block_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise InvalidRequestError(f"EngineConfig.block_size must be None or an integer >= 1, got {size!r}")
        if self.draft_attention not in DRAFT_ATTENTION:
            raise InvalidRequestError(f"draft_attention must be one of {DRAFT_ATTENTION}")
        if not isinstance(self.trace, bool):
            raise InvalidRequestError(f"EngineConfig.trace must be True or False, got {self.trace!r}")


@dataclass(frozen=True, slots=True)
class GenerationOutput:
    request_id: int
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]  # generated ids, prompt excluded
    acceptance_lengths: tuple[int, ...]  # tokens committed per verify step (accepted + bonus)
    finish_reason: str
