"""The running rows: which request sits in which row, and the per-row state that must move with a request.

When a request finishes, the survivors move down to close the gap (stable order). A moving request takes
its target block table, its draft block table, its draft-store length and its pending context features with
it, so its next draft reads exactly the context it would read alone.
"""

from __future__ import annotations

import torch

from runner.errors import PositionInvariantError
from runner.request import Request


class BatchRows:
    def __init__(self, max_rows: int, max_pages: int, device: torch.device) -> None:
        self.requests: list[Request | None] = [None] * max_rows
        self.num_rows = 0  # rows [0, num_rows) are occupied
        # [max_rows, max_pages] page ids; unused entries point at page 0 and are always masked.
        self.target_block_table = torch.zeros(max_rows, max_pages, dtype=torch.long, device=device)
        self.draft_block_table = torch.zeros(max_rows, max_pages, dtype=torch.long, device=device)
        # Draft store length: how many committed positions have context K/V in the draft store.
        self.store_lens = [0] * max_rows
        # Features of committed tokens whose K/V are not in the draft store yet ([c, F], on the device) and their
        # positions ([c], on the host: the invariant check reads them without a device sync).
        self.pending: list[torch.Tensor | None] = [None] * max_rows
        self.pending_positions: list[torch.Tensor | None] = [None] * max_rows
        # Dense (unpaged) draft path only: every committed token's features ([L, F]).
        self.history: list[torch.Tensor | None] = [None] * max_rows

    def active(self) -> list[Request]:
        return [r for r in self.requests[: self.num_rows] if r is not None]

    def add(self, request: Request) -> int:
        row = self.num_rows
        self.requests[row] = request
        self.target_block_table[row] = 0
        self.target_block_table[row, : len(request.target_pages)] = torch.tensor(request.target_pages)
        self.draft_block_table[row] = 0
        if request.draft_pages:
            self.draft_block_table[row, : len(request.draft_pages)] = torch.tensor(request.draft_pages)
        self.store_lens[row] = 0
        self.pending[row] = self.pending_positions[row] = self.history[row] = None
        self.num_rows += 1
        return row

    def move_row(self, src: int, dst: int) -> None:
        self.requests[dst] = self.requests[src]
        self.target_block_table[dst] = self.target_block_table[src]
        self.draft_block_table[dst] = self.draft_block_table[src]
        self.store_lens[dst] = self.store_lens[src]
        self.pending[dst] = self.pending[src]
        self.pending_positions[dst] = self.pending_positions[src]
        self.history[dst] = self.history[src]

    def clear_row(self, row: int) -> None:
        self.requests[row] = None
        self.store_lens[row] = 0
        self.pending[row] = self.pending_positions[row] = self.history[row] = None

    def compact(self) -> list[tuple[int, int]]:
        """Drops finished requests' rows and moves survivors down, keeping their order. Returns the moves."""
        moves: list[tuple[int, int]] = []
        dst = 0
        for src in range(self.num_rows):
            request = self.requests[src]
            if request is None or request.is_finished:
                continue
            if src != dst:
                self.move_row(src, dst)
                moves.append((src, dst))
            dst += 1
        for row in range(dst, self.num_rows):
            self.clear_row(row)
        self.num_rows = dst
        return moves

    def check_position_invariant(self, row: int) -> None:
        """Before a draft: the pending context starts at the store's length and ends just before the anchor.

        Host-side only: positions and lengths live on the CPU, so the check costs no device synchronisation.
        """
        request = self.requests[row]
        assert request is not None
        positions = self.pending_positions[row]
        store_len = self.store_lens[row]
        if positions is None or positions.numel() == 0:
            raise PositionInvariantError(f"request {request.request_id}: no pending context before a draft")
        first, last = int(positions[0]), int(positions[-1])
        if first != store_len or last + 1 != request.num_committed:
            raise PositionInvariantError(
                f"request {request.request_id} (row {row}): pending context covers positions [{first}, {last}] "
                f"but the draft store holds {store_len} and the anchor sits at L={request.num_committed}"
            )
