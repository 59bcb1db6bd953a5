"""The engine: wires the scheduler, the rows, the paged caches, the target and the draft into `generate`.

One `step()` admits and prefills waiting requests, then runs one draft-and-verify round over every running
row, commits the accepted tokens, releases finished requests and compacts the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from runner.batch import BatchRows
from runner.block_manager import BlockAllocator, pages_for
from runner.draft import DFlashDraft
from runner.errors import InvalidRequestError, PositionInvariantError, RunnerError
from runner.kv_cache import PagedKVCache
from runner.loader import load_draft, load_target, resolve_dtype
from runner.proposer import Proposal, propose
from runner.request import FinishReason, Request
from runner.sampling import SamplingParams, draw, greedy_accept, rejection_accept, sampling_probs
from runner.scheduler import Scheduler
from runner.target import PagedInputs, Qwen3Target
from runner.trace import StepRecord, Trace

DRAFT_ATTENTION = ("paged", "dense")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    max_num_seqs: int = 16
    page_size: int = 16
    num_pages: int = 256  # per pool (target cache and draft store each)
    block_size: int | None = None  # None: the draft's own block size
    draft_attention: str = "paged"  # "dense": recompute context K/V from every committed feature (no store)
    trace: bool = False

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "page_size", "num_pages"):
            if getattr(self, name) < 1:
                raise InvalidRequestError(f"EngineConfig.{name} must be >= 1")
        if self.block_size is not None and self.block_size < 1:
            raise InvalidRequestError("EngineConfig.block_size must be >= 1")
        if self.draft_attention not in DRAFT_ATTENTION:
            raise InvalidRequestError(f"draft_attention must be one of {DRAFT_ATTENTION}")


@dataclass(frozen=True, slots=True)
class GenerationOutput:
    request_id: int
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]  # generated ids, prompt excluded
    acceptance_lengths: tuple[int, ...]  # tokens committed per verify step (accepted + bonus)
    finish_reason: str


class Engine:
    def __init__(self, target: Qwen3Target, draft: DFlashDraft | None = None, config: EngineConfig | None = None):
        self.config = config or EngineConfig()
        self.target = target
        self.draft = draft
        param = next(target.parameters())
        self.device, self.dtype = param.device, param.dtype
        tcfg = target.config
        self.block_size = 1 if draft is None else (self.config.block_size or draft.config.block_size)
        cfg = self.config
        self.target_cache = PagedKVCache(
            tcfg.num_hidden_layers,
            cfg.num_pages,
            cfg.page_size,
            tcfg.num_key_value_heads,
            tcfg.head_dim,
            self.dtype,
            self.device,
        )
        self.draft_store: PagedKVCache | None = None
        draft_pool = None
        if draft is not None:
            dcfg = draft.config.target
            self.draft_store = PagedKVCache(
                dcfg.num_hidden_layers,
                cfg.num_pages,
                cfg.page_size,
                dcfg.num_key_value_heads,
                dcfg.head_dim,
                self.dtype,
                self.device,
            )
            draft_pool = BlockAllocator(cfg.num_pages, "draft store")
        self.scheduler = Scheduler(
            cfg.max_num_seqs,
            BlockAllocator(cfg.num_pages, "target KV"),
            draft_pool,
            cfg.page_size,
            self.block_size,
        )
        max_pages = min(cfg.num_pages, pages_for(tcfg.max_position_embeddings + self.block_size, cfg.page_size))
        self.rows = BatchRows(cfg.max_num_seqs, max_pages, self.device)
        self.trace: Trace | None = Trace() if cfg.trace else None
        self.num_steps = 0
        self._next_id = 0
        self._requests: dict[int, Request] = {}

    @classmethod
    def from_pretrained(
        cls,
        target_dir: str | Path,
        draft_dir: str | Path | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        config: EngineConfig | None = None,
    ) -> Engine:
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise RunnerError(f"device {device!r} requested but CUDA is not available")
        torch_device, torch_dtype = torch.device(device), resolve_dtype(dtype)
        target = load_target(target_dir, torch_device, torch_dtype)
        draft = None if draft_dir is None else load_draft(draft_dir, target.config, torch_device, torch_dtype)
        return cls(target, draft, config)

    @property
    def tap_layer_ids(self) -> tuple[int, ...]:
        return () if self.draft is None else self.draft.config.target_layer_ids

    def add_request(self, prompt_ids: list[int], params: SamplingParams) -> int:
        """Queues one request after validating it; a refused request leaves the engine untouched."""
        request = self._validate(prompt_ids, params)
        self.scheduler.add(request)
        self._requests[request.request_id] = request
        self._next_id += 1
        return request.request_id

    def _validate(self, prompt_ids: list[int], params: SamplingParams) -> Request:
        """The request as it would be queued, or a named error; changes no engine state."""
        if not isinstance(params, SamplingParams):
            raise InvalidRequestError("params must be a SamplingParams")
        ids = list(prompt_ids)
        if not ids:
            raise InvalidRequestError("empty prompt")
        vocab = self.target.config.vocab_size
        if any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < vocab for t in ids):
            raise InvalidRequestError(f"prompt ids must be integers in [0, {vocab})")
        limit = self.target.config.max_position_embeddings
        if len(ids) + params.max_tokens > limit:
            raise InvalidRequestError(
                f"prompt ({len(ids)} tokens) + max_tokens ({params.max_tokens}) exceeds the model's context ({limit})"
            )
        generator = None
        if not params.is_greedy:
            generator = torch.Generator(device=self.device)
            generator.manual_seed(params.seed if params.seed is not None else int(torch.randint(2**62, ()).item()))
        request = Request(self._next_id, ids, params, generator=generator)
        self.scheduler.check_fits(request)
        return request

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work()

    def output(self, request_id: int) -> GenerationOutput:
        if request_id not in self._requests:
            raise InvalidRequestError(f"unknown request id {request_id!r}")
        r = self._requests[request_id]
        return GenerationOutput(
            r.request_id,
            tuple(r.prompt_ids),
            tuple(r.generated_ids),
            tuple(r.acceptance_lengths),
            str(r.finish_reason or FinishReason.LENGTH),
        )

    def generate(
        self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]
    ) -> list[GenerationOutput]:
        per_request = params if isinstance(params, list) else [params] * len(prompts)
        if len(per_request) != len(prompts):
            raise InvalidRequestError("one SamplingParams per prompt, or a single one for all")
        if self.has_unfinished():
            raise InvalidRequestError("generate() needs an idle engine; finish or abort running requests first")
        if self.trace is not None:
            self.trace = Trace()
        for prompt, p in zip(prompts, per_request, strict=True):
            self._validate(prompt, p)  # all or nothing: a bad prompt queues none of them
        ids = []
        try:
            for prompt, p in zip(prompts, per_request, strict=True):
                ids.append(self.add_request(prompt, p))
            while self.has_unfinished():
                self.step()
        except BaseException:
            self.abort_all()
            raise
        return [self.output(i) for i in ids]

    def abort_all(self) -> None:
        """Drops every queued and running request and frees their pages: the engine is idle again."""
        for request in self.rows.active():
            self.scheduler.release(request)
        for row in range(self.rows.num_rows):
            self.rows.clear_row(row)
        self.rows.num_rows = 0
        self.scheduler.waiting.clear()

    @torch.inference_mode()
    def step(self) -> list[int]:
        """One engine step. Returns the ids of the requests that finished in it."""
        finished: list[Request] = []
        admitted = self.scheduler.admit()
        if admitted:
            self._prefill(admitted)
            # A request can end at its first token (max_tokens=1, or a stop token): it must never be decoded.
            finished += self._retire()
        if self.rows.num_rows:
            self._decode()
            finished += self._retire()
        self.num_steps += 1
        return [r.request_id for r in finished]

    def _retire(self) -> list[Request]:
        """Releases finished requests' pages and compacts the rows; survivors carry their state along."""
        finished = [r for r in self.rows.active() if r.is_finished]
        for request in finished:
            self.scheduler.release(request)
        for src, dst in self.rows.compact():
            if self.trace is not None:
                moved = self.rows.requests[dst]
                self.trace.row_moves.append((self.num_steps, moved.request_id if moved else -1, src, dst))
        return finished

    def _first_token(self, request: Request, logits: torch.Tensor) -> int:
        p = request.params
        if p.is_greedy:
            return int(logits.argmax())
        return draw(sampling_probs(logits, p.temperature, p.top_p, p.top_k), request.generator)

    def _prefill(self, requests: list[Request]) -> None:
        rows = [self.rows.add(r) for r in requests]
        lens = torch.tensor([r.num_prompt for r in requests], device=self.device)
        width = int(lens.max())
        ids = torch.zeros(len(requests), width, dtype=torch.long, device=self.device)
        for i, r in enumerate(requests):
            ids[i, : r.num_prompt] = torch.tensor(r.prompt_ids)
        positions = torch.arange(width, device=self.device).expand(len(requests), width)
        inputs = PagedInputs(ids, positions, positions < lens[:, None], self.rows.target_block_table[rows], lens)
        logits, taps = self.target(inputs, self.target_cache, self.tap_layer_ids, logit_index=lens - 1)
        for i, (row, r) in enumerate(zip(rows, requests, strict=True)):
            r.start(self._first_token(r, logits[i, 0]))
            if taps is not None:
                self.rows.pending[row] = taps[i, : r.num_prompt]
                self.rows.pending_positions[row] = torch.arange(r.num_prompt, device=self.device)

    def check_position_invariant(self, row: int) -> None:
        """Before a draft: the pending context starts at the store's length and ends just before the anchor."""
        request = self.rows.requests[row]
        assert request is not None
        positions = self.rows.pending_positions[row]
        store_len = self.rows.store_lens[row]
        if positions is None or positions.numel() == 0:
            raise PositionInvariantError(f"request {request.request_id}: no pending context before a draft")
        first, last = int(positions[0]), int(positions[-1])
        if first != store_len or last + 1 != request.num_committed:
            raise PositionInvariantError(
                f"request {request.request_id} (row {row}): pending context covers positions [{first}, {last}] "
                f"but the draft store holds {store_len} and the anchor sits at L={request.num_committed}"
            )

    def _decode(self) -> None:
        requests = [r for r in self.rows.requests[: self.rows.num_rows] if r is not None]
        num_rows = len(requests)
        sizes = [min(self.block_size, r.max_length - r.num_committed) for r in requests]
        width = max(sizes)
        committed = torch.tensor([r.num_committed for r in requests], device=self.device)
        offsets = torch.arange(width, device=self.device)
        positions = committed[:, None] + offsets
        valid = offsets[None, :] < torch.tensor(sizes, device=self.device)[:, None]
        store_before = list(self.rows.store_lens[:num_rows])
        proposal = Proposal.empty(num_rows)
        if self.draft is not None and width > 1:
            for row in range(num_rows):
                self.check_position_invariant(row)
            store = self.draft_store if self.config.draft_attention == "paged" else None
            proposal = propose(self.draft, self.target, self.rows, store, requests, sizes, positions, valid)
        block = torch.full((num_rows, width), 0, dtype=torch.long, device=self.device)
        for row, r in enumerate(requests):
            block[row, 0] = r.anchor
            if proposal.drafted[row]:
                block[row, 1 : 1 + len(proposal.drafted[row])] = torch.tensor(proposal.drafted[row])
        inputs = PagedInputs(block, positions, valid, self.rows.target_block_table[:num_rows], committed + valid.sum(1))
        logits, taps = self.target(inputs, self.target_cache, self.tap_layer_ids)
        accepted = greedy_accept(block[:, 1:], logits.argmax(-1), [s - 1 for s in sizes])
        argmax = logits.argmax(-1).tolist()
        for row, r in enumerate(requests):
            drafted = proposal.drafted[row]
            p = r.params
            if p.is_greedy:
                count, bonus = accepted[row], argmax[row][accepted[row]]
            else:
                target_probs = sampling_probs(logits[row, : sizes[row]], p.temperature, p.top_p, p.top_k)
                count, bonus = rejection_accept(
                    drafted, target_probs, proposal.probs[row], proposal.indices[row], r.generator
                )
            start = r.num_committed
            produced = r.commit(drafted[:count] + [bonus])
            r.acceptance_lengths.append(produced)
            if taps is not None:
                # Only committed tokens' features become draft context.
                self.rows.pending[row] = taps[row, :produced]
                self.rows.pending_positions[row] = torch.arange(start, start + produced, device=self.device)
            if self.trace is not None:
                self.trace.records.append(
                    StepRecord(
                        step=self.num_steps,
                        request_id=r.request_id,
                        row=row,
                        committed_len=start,
                        drafted_ids=tuple(drafted),
                        accepted=count,
                        produced=produced,
                        positions=(start, start + sizes[row] - 1),
                        store_len_before=store_before[row],
                        store_len_after=self.rows.store_lens[row],
                        num_pending_after=produced,
                    )
                )
