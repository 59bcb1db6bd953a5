"""Spies on one engine of the embedded runner while an observation runs: what the draft proposed (ids and block
logits), what the target returned, what the acceptance rule was handed (drafted ids, p, q) and what it decided,
and, after every step, the state each row reads (its store and cache contents, page tables, pending context).

Nothing in the runner knows it is watched: module-level functions the engine calls (`propose`, the acceptance
rule) are wrapped in `runner.engine`'s namespace, the draft's `logits` is shadowed on the instance and the
target gets a forward hook, all undone when the `with` block ends. The wrappers call whatever the imported
runner defines, mutated or not, and pass its results through untouched. Knows nothing of workloads, mutations
or comparisons.

The hooks are bound to the engine's internal signatures, listed in `CONTRACTS`: `watch` checks them before it
wraps anything and reads arguments by name, never by position, so a refactor of the runner (a renamed or
reordered parameter) is a `HookContractError` naming the function and what changed, not a wrong observation
or an "error" observable blamed on the engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch

import runner.engine as engine_module
from runner.block_manager import pages_for
from runner.engine import Engine
from verify.observe.protocol import ObserverError

__all__ = ["CONTRACTS", "Emit", "HookContractError", "check_contracts", "record_state", "watch"]

Emit = Callable[[int, int, str, Any], None]

# What each hook relies on: the callable (where `watch` finds it) -> the parameter names it reads or passes on,
# in order. The target's forward hook reads `inputs.input_ids` and `inputs.valid` and `output[0]` (logits).
CONTRACTS: dict[str, tuple[str, ...]] = {
    "runner.engine.propose": (
        "draft", "target", "rows", "store", "requests", "sizes", "anchors", "positions", "valid",
    ),
    "runner.engine.greedy_accept_counts": ("drafted", "target_argmax", "num_valid"),
    "runner.engine.rejection_accept": ("drafted", "target_probs", "draft_probs", "draft_indices", "generator"),
    "engine.draft.logits": ("hidden", "lm_head"),
    "engine.target.forward": ("inputs", "cache", "tap_layer_ids", "logit_index"),
}  # fmt: skip


class HookContractError(ObserverError):
    """The runner no longer has a signature the observer's hooks rely on (see `CONTRACTS`): the hooks in
    verify/observe/runner_hooks.py need updating. A harness failure, never an observation of the engine."""


def _parameters(function: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)


def check_contracts(engine: Engine) -> None:
    """Raise HookContractError if a function `watch` wraps no longer takes the parameters it relies on."""
    found: dict[str, Callable[..., Any] | None] = {
        "runner.engine.propose": getattr(engine_module, "propose", None),
        "runner.engine.greedy_accept_counts": getattr(engine_module, "greedy_accept_counts", None),
        "runner.engine.rejection_accept": getattr(engine_module, "rejection_accept", None),
        "engine.draft.logits": None if engine.draft is None else getattr(engine.draft, "logits", None),
        "engine.target.forward": getattr(engine.target, "forward", None),
    }
    for name, function in found.items():
        if name == "engine.draft.logits" and engine.draft is None:
            continue
        if function is None or not callable(function):
            raise HookContractError(f"{name} is gone: the observer's hooks wrap it (verify/observe/runner_hooks.py)")
        want, have = CONTRACTS[name], _parameters(function)
        if have[: len(want)] != want:
            raise HookContractError(
                f"{name} takes ({', '.join(have)}); the observer's hooks rely on ({', '.join(want)}): update "
                "CONTRACTS and the hooks in verify/observe/runner_hooks.py"
            )


def _argument(signature: inspect.Signature, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The argument passed for parameter `name`, however the caller spelled the call."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments[name]


def _rows_of(engine: Engine, num_rows: int) -> list[int]:
    """The rows of a call over `num_rows` rows: the last ones occupied (prefill adds rows at the end)."""
    return list(range(engine.rows.num_rows - num_rows, engine.rows.num_rows))


@contextlib.contextmanager
def watch(engine: Engine, emit: Emit) -> Iterator[None]:
    """Wrap the engine's collaborators for the `with` block; each call emits what it saw, keyed by step and row.
    Raises HookContractError first if the engine no longer has the signatures the wrappers rely on."""
    check_contracts(engine)
    saved = {name: getattr(engine_module, name) for name in ("propose", "greedy_accept_counts", "rejection_accept")}
    signatures = {name: inspect.signature(function) for name, function in saved.items()}
    owners: dict[int, int] = {}  # id(generator) -> row, refreshed at every decode
    # Each row's drafted slots this step (block size - 1, less where its budget ends): the slots past them are
    # padding, computed and never read, so they are not observed.
    slots: list[int] = []

    def propose(*args: Any, **kwargs: Any) -> Any:
        sizes = _argument(signatures["propose"], "sizes", args, kwargs)
        slots[:] = [size - 1 for size in sizes]
        proposal = saved["propose"](*args, **kwargs)
        owners.clear()
        for row, request in enumerate(engine.rows.active()):
            if request.generator is not None:
                owners[id(request.generator)] = row
            emit(engine.num_steps, row, "drafted", proposal.drafted[row, : slots[row]])
            if proposal.probs[row] is not None:
                emit(engine.num_steps, row, "draft q", proposal.probs[row])
            if proposal.indices[row] is not None:
                emit(engine.num_steps, row, "draft candidates", proposal.indices[row])
        return proposal

    def greedy_accept_counts(*args: Any, **kwargs: Any) -> Any:
        counts = saved["greedy_accept_counts"](*args, **kwargs)
        for row, count in enumerate(counts.tolist()):
            emit(engine.num_steps, row, "greedy accepted", count)
        return counts

    def rejection_accept(*args: Any, **kwargs: Any) -> Any:
        accepted, token = saved["rejection_accept"](*args, **kwargs)
        bound = signatures["rejection_accept"].bind(*args, **kwargs)
        drafted, target_probs = bound.arguments["drafted"], bound.arguments["target_probs"]
        draft_probs, generator = bound.arguments["draft_probs"], bound.arguments["generator"]
        row = owners.get(id(generator), -1)
        emit(engine.num_steps, row, "rule drafted", torch.as_tensor(drafted))
        emit(engine.num_steps, row, "rule p", target_probs)
        emit(engine.num_steps, row, "rule q", draft_probs)
        emit(engine.num_steps, row, "rule accepted", accepted)
        emit(engine.num_steps, row, "rule next token", token)
        return accepted, token

    def target_hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        inputs, logits = _argument(target_signature, "inputs", args, kwargs), output[0]
        prefill = logits.shape[1] != inputs.input_ids.shape[1]  # prefill returns the last position's logits only
        for i, row in enumerate(_rows_of(engine, logits.shape[0])):
            row_logits = logits[i] if prefill else logits[i][inputs.valid[i]]
            emit(engine.num_steps, row, "prefill logits" if prefill else "target logits", row_logits)

    draft = engine.draft
    draft_logits = None if draft is None else draft.logits

    def logits(*args: Any, **kwargs: Any) -> Any:
        assert draft_logits is not None
        out = draft_logits(*args, **kwargs)
        for row in range(out.shape[0]):
            emit(engine.num_steps, row, "block logits", out[row, : slots[row]] if row < len(slots) else out[row])
        return out

    target_signature = inspect.signature(engine.target.forward)
    handle = engine.target.register_forward_hook(target_hook, with_kwargs=True)
    wrappers = {"propose": propose, "greedy_accept_counts": greedy_accept_counts, "rejection_accept": rejection_accept}
    try:
        for name, wrapper in wrappers.items():
            setattr(engine_module, name, wrapper)
        if draft is not None:
            draft.logits = logits  # type: ignore[method-assign]  # shadows the method on this instance only
        yield
    finally:
        handle.remove()
        for name, original in saved.items():
            setattr(engine_module, name, original)
        if draft is not None and "logits" in vars(draft):
            del draft.logits


def _contents(cache: Any, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """K and V of positions [0, length) through one row's block table: [2, layers, length, kv_heads, head_dim]."""
    positions = torch.arange(length)[None]
    slots = cache.slots(block_table[None], positions)[0]
    return torch.stack([cache.k[:, slots], cache.v[:, slots]])


def record_state(engine: Engine, emit: Emit, step: int, finished: list[int], seen_records: int) -> int:
    """After a step: what every running row will read next, the pools, finished outputs and the new trace
    records. Returns how many trace records have been emitted so far."""
    rows, page_size = engine.rows, engine.config.page_size
    for row, request in enumerate(rows.requests[: rows.num_rows]):
        if request is None:
            emit(step, row, "empty row", True)
            continue
        committed = request.num_committed
        emit(step, row, "request", request.request_id)
        emit(step, row, "committed", tuple(request.token_ids[: committed + 1]))
        emit(step, row, "acceptance lengths", tuple(request.acceptance_lengths))
        written = committed  # the target's K/V cover every committed token but the newest (its anchor)
        target_table = rows.target_block_table[row, : pages_for(written, page_size)]
        emit(step, row, "target pages", target_table)
        emit(step, row, "target cache", _contents(engine.target_cache, rows.target_block_table[row], written))
        if engine.draft_store is not None:
            store_len = rows.store_lens[row]
            emit(step, row, "store length", store_len)
            emit(step, row, "draft pages", rows.draft_block_table[row, : pages_for(store_len, page_size)])
            emit(step, row, "draft store", _contents(engine.draft_store, rows.draft_block_table[row], store_len))
            emit(step, row, "pending positions", rows.pending_positions[row])
            emit(step, row, "pending features", rows.pending[row])
            if rows.history[row] is not None:
                emit(step, row, "dense history", rows.history[row])
    scheduler = engine.scheduler
    pools = (scheduler.target_pool, scheduler.draft_pool)
    emit(step, -1, "free pages", tuple(-1 if pool is None else pool.num_free for pool in pools))
    emit(step, -1, "rows and waiting", (rows.num_rows, len(scheduler.waiting)))
    for request_id in finished:
        out = engine.output(request_id)
        emit(step, -1, "finished", (request_id, out.token_ids, out.acceptance_lengths, str(out.finish_reason)))
    trace = engine.trace
    if trace is None:
        return seen_records
    for record in trace.records[seen_records:]:
        emit(step, record.row, "trace record", dataclasses.asdict(record))
    moves = [m for m in trace.row_moves if m[0] == step]
    if moves:
        emit(step, -1, "row moves", moves)
    return len(trace.records)
