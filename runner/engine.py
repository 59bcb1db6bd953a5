"""The engine: wires the scheduler, the rows, the paged caches, the target and the draft into `generate`.

One `step()` admits and prefills waiting requests, runs one draft-and-verify round over every running row,
commits the accepted tokens, releases finished requests and compacts the rows. Acceptance and bonus tokens
are computed for all rows on the device; one transfer per step brings them back for the bookkeeping.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import torch

from runner.batch import BatchRows
from runner.block_manager import BlockAllocator, pages_for
from runner.draft import DFlashDraft
from runner.engine_config import EngineConfig, GenerationOutput
from runner.errors import InvalidRequestError, RunnerError
from runner.kv_cache import PagedKVCache
from runner.loader import load_draft, load_target, resolve_dtype
from runner.proposer import Proposal, propose
from runner.request import FinishReason, Request, check_request
from runner.sampling import SamplingParams, greedy_accept_counts, rejection_accept, sampling_probs
from runner.scheduler import Scheduler
from runner.target import PagedInputs, Qwen3Target
from runner.trace import StepRecord, Trace


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
        self.target_cache = PagedKVCache.for_model(tcfg, cfg.num_pages, cfg.page_size, self.dtype, self.device)
        self.draft_store: PagedKVCache | None = None
        draft_pool = None
        if draft is not None:
            self.draft_store = PagedKVCache.for_model(
                draft.config.target, cfg.num_pages, cfg.page_size, self.dtype, self.device
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
        self._requests: dict[int, Request] = {}  # queued and running requests only
        self._outputs: dict[int, GenerationOutput] = {}  # finished or aborted, until popped or the next generate
        self._offsets = torch.arange(self.block_size, device=self.device)  # [B], reused by every decode step

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
        ids = self._validate(prompt_ids, params)
        return self._enqueue(ids, params)

    def _validate(self, prompt_ids: list[int], params: SamplingParams) -> list[int]:
        """The prompt's ids, or a named error. Reads no RNG and changes no engine state."""
        if not isinstance(params, SamplingParams):
            raise InvalidRequestError("params must be a SamplingParams")
        tcfg = self.target.config
        ids = check_request(prompt_ids, params, tcfg.vocab_size, tcfg.max_position_embeddings)
        self.scheduler.check_fits_length(len(ids) + params.max_tokens)
        return ids

    def _enqueue(self, ids: list[int], params: SamplingParams) -> int:
        """Only after validation: the unseeded request's seed is the one draw from the global RNG."""
        generator = None
        if not params.is_greedy:
            generator = torch.Generator(device=self.device)
            generator.manual_seed(params.seed if params.seed is not None else int(torch.randint(2**62, ()).item()))
        stop_ids = set(params.stop_token_ids)
        if not params.ignore_eos:
            stop_ids.update(self.target.config.eos_token_ids)
        request = Request(self._next_id, ids, params, generator=generator, stop_ids=frozenset(stop_ids))
        self.scheduler.add(request)
        self._requests[request.request_id] = request
        self._next_id += 1
        return request.request_id

    def has_unfinished(self) -> bool:
        return self.scheduler.has_work()

    def output(self, request_id: int) -> GenerationOutput:
        """A queued or running request's progress, or a finished one's result (kept until popped)."""
        if request_id in self._outputs:
            return self._outputs[request_id]
        if request_id not in self._requests:
            raise InvalidRequestError(f"unknown request id {request_id!r}")
        return self._requests[request_id].to_output()

    def pop_output(self, request_id: int) -> GenerationOutput:
        """A finished request's result, forgotten by the engine afterwards."""
        if request_id not in self._outputs:
            raise InvalidRequestError(f"request id {request_id!r} has not finished or is unknown")
        return self._outputs.pop(request_id)

    def generate(
        self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]
    ) -> list[GenerationOutput]:
        """Runs the prompts to completion. A refused call (any bad prompt or params) changes nothing: not the
        trace, the global RNG, the pages, the request table nor the previous call's outputs."""
        if not isinstance(prompts, list | tuple):
            raise InvalidRequestError(f"prompts must be a list of prompts, got {type(prompts).__name__}")
        per_request = list(params) if isinstance(params, list | tuple) else [params] * len(prompts)
        if len(per_request) != len(prompts):
            raise InvalidRequestError("one SamplingParams per prompt, or a single one for all")
        if self.has_unfinished():
            raise InvalidRequestError("generate() needs an idle engine; finish or abort running requests first")
        checked = [self._validate(prompt, p) for prompt, p in zip(prompts, per_request, strict=True)]
        if self.trace is not None:
            self.trace = Trace()
        self._outputs.clear()
        try:
            ids = [self._enqueue(prompt, p) for prompt, p in zip(checked, per_request, strict=True)]
            while self.has_unfinished():
                self.step()
        except BaseException:
            self.abort_all()
            raise
        return [self._outputs[i] for i in ids]

    def abort(self, request_id: int) -> None:
        """Ends a queued or running request now: its pages are freed and it leaves the request table."""
        request = self._requests.get(request_id)
        if request is None:
            raise InvalidRequestError(f"request id {request_id!r} is not queued or running")
        request.finish_reason = FinishReason.ABORT
        if any(w is request for w in self.scheduler.waiting):  # identity: equal fields are not the same request
            self.scheduler.waiting = deque(w for w in self.scheduler.waiting if w is not request)
            self._finish(request)
        else:
            self._retire()  # running: released and compacted away like a request that finished

    def abort_all(self) -> None:
        """Drops every queued and running request and frees their pages: the engine is idle again."""
        for request in self.rows.active():
            self.scheduler.release(request)
        for request in [*self.rows.active(), *self.scheduler.waiting]:
            if not request.is_finished:
                request.finish_reason = FinishReason.ABORT
            self._finish(request)
        for row in range(self.rows.num_rows):
            self.rows.clear_row(row)
        self.rows.num_rows = 0
        self.scheduler.waiting.clear()

    def _finish(self, request: Request) -> None:
        """The request's result becomes a record; the request (its RNG, its lists) leaves the table."""
        self._outputs[request.request_id] = request.to_output()
        self._requests.pop(request.request_id, None)

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
            self._finish(request)
        for src, dst in self.rows.compact():
            if self.trace is not None:
                moved = self.rows.requests[dst]
                self.trace.row_moves.append((self.num_steps, moved.request_id if moved else -1, src, dst))
        return finished

    def _prefill(self, requests: list[Request]) -> None:
        rows = [self.rows.add(r) for r in requests]
        width = max(r.num_prompt for r in requests)
        ids = torch.tensor([r.prompt_ids + [0] * (width - r.num_prompt) for r in requests], device=self.device)
        lens = torch.tensor([r.num_prompt for r in requests], device=self.device)
        positions = torch.arange(width, device=self.device).expand(len(requests), width)
        table = self.rows.target_block_table[rows[0] : rows[-1] + 1]  # admitted rows are consecutive
        inputs = PagedInputs(ids, positions, positions < lens[:, None], table, lens, width)
        logits, taps = self.target(inputs, self.target_cache, self.tap_layer_ids, logit_index=lens - 1)
        first = logits[:, 0].argmax(-1)  # [R]; sampled rows draw theirs below, on the device
        for i, p in enumerate(r.params for r in requests):
            if not p.is_greedy:
                probs = sampling_probs(logits[i, 0], p.temperature, p.top_p, p.top_k)
                first[i] = torch.multinomial(probs, 1, generator=requests[i].generator)[0]
        for i, (row, r, token) in enumerate(zip(rows, requests, first.tolist(), strict=True)):  # one transfer
            r.start(token)
            if taps is not None:
                self.rows.pending[row] = taps[i, : r.num_prompt]
                self.rows.pending_positions[row] = torch.arange(r.num_prompt)

    def check_position_invariant(self, row: int) -> None:
        """Before a draft: the row's pending context starts at the store's length and ends before the anchor."""
        self.rows.check_position_invariant(row)

    def _decode(self) -> None:
        requests = self.rows.active()
        num_rows = len(requests)
        sizes = [min(self.block_size, r.max_length - r.num_committed) for r in requests]
        width = max(sizes)
        # One host-to-device copy of the step's row metadata: [3, R] = committed L, block size, anchor.
        meta = torch.tensor([[r.num_committed for r in requests], sizes, [r.anchor for r in requests]])
        committed, size, anchors = meta if self.device.type == "cpu" else meta.to(self.device, non_blocking=True)
        offsets = self._offsets[:width]
        positions = committed[:, None] + offsets  # [R, W]
        valid = offsets[None, :] < size[:, None]
        store_before = self.rows.store_lens[:num_rows]
        proposal = Proposal.empty(num_rows, self.device)
        if self.draft is not None and width > 1:
            for row in range(num_rows):
                self.check_position_invariant(row)
            store = self.draft_store if self.config.draft_attention == "paged" else None
            proposal = propose(self.draft, self.target, self.rows, store, requests, sizes, anchors, positions, valid)
        block = torch.cat([anchors[:, None], proposal.drafted[:, : width - 1]], dim=1)  # [R, W]
        max_len = max(r.num_committed + s for r, s in zip(requests, sizes, strict=True))
        inputs = PagedInputs(
            block, positions, valid, self.rows.target_block_table[:num_rows], committed + size, max_len
        )
        logits, taps = self.target(inputs, self.target_cache, self.tap_layer_ids)
        argmax = logits.argmax(-1)  # [R, W]
        accepted = greedy_accept_counts(block[:, 1:], argmax, size - 1)  # [R]
        bonus = argmax.gather(1, accepted[:, None])[:, 0]
        for row, r in enumerate(requests):
            p = r.params
            if not p.is_greedy:
                target_probs = sampling_probs(logits[row, : sizes[row]], p.temperature, p.top_p, p.top_k)
                accepted[row], bonus[row] = rejection_accept(
                    block[row, 1 : sizes[row]], target_probs, proposal.probs[row], proposal.indices[row], r.generator
                )
        # The step's one device-to-host transfer: [R, W + 1] = drafted ids, accepted count, bonus token.
        host = torch.cat([block[:, 1:], accepted[:, None], bonus[:, None]], dim=1).tolist()
        for row, r in enumerate(requests):
            drafted, count, token = host[row][: sizes[row] - 1], host[row][-2], host[row][-1]
            start = r.num_committed
            produced = r.commit(drafted[:count] + [token])
            r.acceptance_lengths.append(produced)
            if taps is not None:
                # Only committed tokens' features become draft context.
                self.rows.pending[row] = taps[row, :produced]
                self.rows.pending_positions[row] = torch.arange(start, start + produced)
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
                        num_pending_after=0 if self.rows.pending[row] is None else len(self.rows.pending[row]),
                    )
                )
