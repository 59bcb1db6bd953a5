"""The structured per-step trace: what each request drafted, where, and what was accepted.

Records are frozen and JSON-friendly; a test reads them directly instead of parsing logs. Tracing is off by
default and then costs one attribute check per step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True, slots=True)
class StepRecord:
    step: int
    request_id: int
    row: int
    committed_len: int  # L before the step: the anchor's position
    drafted_ids: tuple[int, ...]  # the draft's block after the anchor (empty for plain decoding)
    accepted: int  # drafted tokens the target accepted
    produced: int  # tokens committed this step (accepted + bonus, cut by stop tokens and the budget)
    positions: tuple[int, int]  # [first, last] absolute positions of the verified block
    store_len_before: int  # draft store length before the draft wrote this step's context
    store_len_after: int  # draft store length after the step (must be the new L minus pending rows)
    num_pending_after: int  # context rows waiting for the next draft


@dataclass(slots=True)
class Trace:
    records: list[StepRecord] = field(default_factory=list)
    row_moves: list[tuple[int, int, int, int]] = field(default_factory=list)  # (step, request_id, src, dst)

    def for_request(self, request_id: int) -> list[StepRecord]:
        return [r for r in self.records if r.request_id == request_id]

    def drafted_blocks(self, request_id: int) -> list[tuple[int, ...]]:
        return [r.drafted_ids for r in self.for_request(request_id)]

    def to_dict(self) -> dict[str, object]:
        return {"records": [asdict(r) for r in self.records], "row_moves": [list(m) for m in self.row_moves]}
