"""The free and used pages of one paged KV pool. Plain Python: it never imports torch.

A page holds `page_size` consecutive positions of one request. The allocator hands out page ids and takes
them back; it knows nothing of what is stored in them.
"""

from __future__ import annotations

from collections import deque

from runner.errors import CacheCapacityError


def pages_for(num_positions: int, page_size: int) -> int:
    return -(-num_positions // page_size)


class BlockAllocator:
    def __init__(self, num_pages: int, name: str) -> None:
        if num_pages <= 0:
            raise CacheCapacityError(f"{name} pool needs at least one page, got {num_pages}")
        self.name = name
        self.num_pages = num_pages
        self._free: deque[int] = deque(range(num_pages))
        self._used: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return len(self._used)

    def allocate(self, count: int) -> list[int]:
        """`count` pages, or CacheCapacityError and nothing allocated."""
        if count > len(self._free):
            raise CacheCapacityError(f"{self.name} pool: need {count} pages, {len(self._free)} free")
        pages = [self._free.popleft() for _ in range(count)]
        self._used.update(pages)
        return pages

    def free(self, pages: list[int]) -> None:
        for page in pages:
            if page not in self._used:
                raise ValueError(f"{self.name} pool: page {page} freed twice or never allocated")
            self._used.remove(page)
            self._free.append(page)
