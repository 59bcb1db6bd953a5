"""Who runs next: a FIFO waiting queue, admission against free rows and free pages, release on finish.

Plain Python, no tensors. A request is admitted only when both pools can hold its whole budget
(prompt + max_tokens + one block of lookahead), so a running request never waits for a page.
"""

from __future__ import annotations

from collections import deque

from runner.block_manager import BlockAllocator, pages_for
from runner.errors import CacheCapacityError
from runner.request import Request


class Scheduler:
    def __init__(
        self,
        max_rows: int,
        target_pool: BlockAllocator,
        draft_pool: BlockAllocator | None,
        page_size: int,
        block_size: int,
    ) -> None:
        self.max_rows = max_rows
        self.target_pool = target_pool
        self.draft_pool = draft_pool
        self.page_size = page_size
        self.block_size = block_size
        self.waiting: deque[Request] = deque()
        self.num_running = 0

    def pages_needed(self, request: Request) -> int:
        return pages_for(request.max_length + self.block_size, self.page_size)

    def check_fits(self, request: Request) -> None:
        self.check_fits_length(request.max_length)

    def check_fits_length(self, max_length: int) -> None:
        """Refuses, before anything is queued, a request (prompt + max_tokens = max_length) that could never fit
        even in an empty cache."""
        need = pages_for(max_length + self.block_size, self.page_size)
        if need > self.target_pool.num_pages:
            raise CacheCapacityError(
                f"request needs {need} KV pages ({max_length} tokens + a block of {self.block_size}); "
                f"the cache has {self.target_pool.num_pages} pages of {self.page_size}"
            )
        if self.draft_pool is not None and need > self.draft_pool.num_pages:
            raise CacheCapacityError(f"request needs {need} draft-store pages; there are {self.draft_pool.num_pages}")

    def add(self, request: Request) -> None:
        self.check_fits(request)
        self.waiting.append(request)

    def admit(self) -> list[Request]:
        """Takes waiting requests in order while a row and their pages are free."""
        admitted: list[Request] = []
        while self.waiting and self.num_running < self.max_rows:
            request = self.waiting[0]
            need = self.pages_needed(request)
            if need > self.target_pool.num_free:
                break
            if self.draft_pool is not None and need > self.draft_pool.num_free:
                break
            self.waiting.popleft()
            request.target_pages = self.target_pool.allocate(need)
            if self.draft_pool is not None:
                request.draft_pages = self.draft_pool.allocate(need)
            self.num_running += 1
            admitted.append(request)
        return admitted

    def release(self, request: Request) -> None:
        """Frees a running request's pages. A request holds at least one page while it runs, so one without
        pages was released already: releasing it again must not count it off the running total twice."""
        if not request.target_pages:
            return
        self.target_pool.free(request.target_pages)
        request.target_pages = []
        if self.draft_pool is not None:
            self.draft_pool.free(request.draft_pages)
            request.draft_pages = []
        self.num_running -= 1

    def has_work(self) -> bool:
        return bool(self.waiting) or self.num_running > 0
