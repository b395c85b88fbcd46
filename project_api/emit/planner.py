"""Static memory plan for the activation pool.

Every intermediate tensor (not a constant, not a graph input or output: those are the caller's
buffers) gets a fixed byte offset in one pool that the generated ``run`` function takes with a
single ``TVMBackendAllocWorkspace`` call. Tensors that share storage (a RESHAPE's output aliases
its input) are planned as one buffer; an op's scratch (a wide accumulator) is a buffer that lives
during that op only.

Algorithm (greedy by size, as TFLM's ``GreedyMemoryPlanner``):

1. Each buffer has a size (rounded up to ``ALIGN`` bytes) and a lifetime ``[first, last]``: the
   index of the op that writes it first and of the op that reads it last. Two buffers conflict
   when their lifetimes intersect (an op's inputs and outputs are all live during that op, so
   an output never lands on an input of the same op).
2. The buffers are sorted by size, largest first (ties: earlier first use, then buffer id, so the
   plan is deterministic).
3. Each buffer in turn is placed at the lowest offset where it overlaps no already placed buffer
   that conflicts with it. The candidate offsets are 0 and the end of every conflicting placed
   buffer, tried in increasing order.
4. The pool size is the largest ``offset + size``.
5. Two more plans are made with the buffers in execution order (first use, then size): one
   placing at the lowest offset as in 3, one "best fit" that puts a buffer in the smallest
   enclosed gap it fits, at the gap's top end (else above everything). On chains whose sizes go
   up and down (an autoencoder's 128 -> 8 -> 128) the last one reaches the lower bound where
   the size order does not. The smallest plan wins (earlier strategies on a tie).

``lower_bound`` is the most bytes live at once during any op; no plan can be smaller, so it
measures how close the greedy plan is to optimal.
"""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 8


@dataclass
class Buffer:
    """One storage group: its id, size, lifetime and (after planning) offset."""

    id: int
    size: int
    first: int
    last: int
    offset: int = -1

    def conflicts(self, other: Buffer) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class MemoryPlan:
    buffers: list[Buffer]
    pool_size: int
    lower_bound: int


def align(n: int) -> int:
    """``n`` rounded up to the pool's alignment, as every buffer is planned."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


_align = align


def plan(buffers: list[Buffer]) -> MemoryPlan:
    """Assign an offset to every buffer (in place) and return the plan."""
    for b in buffers:
        b.size = _align(b.size)
    best: dict[int, int] | None = None
    best_size = 0
    by_size = sorted(buffers, key=lambda b: (-b.size, b.first, b.id))
    by_time = sorted(buffers, key=lambda b: (b.first, -b.size, b.id))
    for offsets in (_place(by_size), _place(by_time), _place_best_fit(by_time)):
        size = max((offsets[b.id] + b.size for b in buffers), default=0)
        if best is None or size < best_size:
            best, best_size = offsets, size
    for b in buffers:
        b.offset = best[b.id] if best else 0
    return MemoryPlan(buffers, best_size, lower_bound(buffers))


def _place(order: list[Buffer]) -> dict[int, int]:
    """Greedy placement of ``order``: buffer id -> lowest offset free of conflicts."""
    placed: list[Buffer] = []
    for buf in order:
        live = sorted((p for p in placed if p.conflicts(buf)), key=lambda p: p.offset)
        offset = 0
        for p in live:
            if offset + buf.size <= p.offset:
                break
            offset = max(offset, p.offset + p.size)
        buf.offset = offset
        placed.append(buf)
    return {b.id: b.offset for b in order}


def _place_best_fit(order: list[Buffer]) -> dict[int, int]:
    """Placement of ``order`` into the smallest enclosed gap that fits, at the gap's top."""
    placed: list[Buffer] = []
    for buf in order:
        live = sorted((p for p in placed if p.conflicts(buf)), key=lambda p: p.offset)
        best_gap: tuple[int, int] | None = None  # (gap size, gap end)
        cursor = 0
        for p in live:
            gap = p.offset - cursor
            if gap >= buf.size and (best_gap is None or gap < best_gap[0]):
                best_gap = (gap, p.offset)
            cursor = max(cursor, p.offset + p.size)
        buf.offset = best_gap[1] - buf.size if best_gap is not None else cursor
        placed.append(buf)
    return {b.id: b.offset for b in order}


def lower_bound(buffers: list[Buffer]) -> int:
    """The largest number of bytes live during any one op."""
    if not buffers:
        return 0
    live = [0] * (max(b.last for b in buffers) + 2)  # bytes starting (+) and ending (-) per op
    for b in buffers:
        live[b.first] += b.size
        live[b.last + 1] -= b.size
    best = total = 0
    for change in live:
        total += change
        best = max(best, total)
    return best


def overlapping_pairs(buffers: list[Buffer]) -> list[tuple[int, int]]:
    """Pairs of conflicting buffers whose byte ranges intersect (for tests; O(n^2))."""
    bad = []
    for i, a in enumerate(buffers):
        for b in buffers[i + 1:]:
            if a.conflicts(b) and a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                bad.append((a.id, b.id))
    return bad
