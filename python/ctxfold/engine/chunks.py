"""MULTI_LEVEL compaction (the OpenScroll design's last stage): the history
before the recent chunk is cut into chunks of about `chunk_size` messages;
each chunk can stand as one summary message at level 1 (its transcript
summarised to `summary_ratio` of its tokens) or level 2 (the level-1 summary
summarised again by the same ratio), or be dropped. The recent chunk and the
hard-protected messages are planned message by message, as in OPTIMAL, and the
knapsack picks every choice at once, exactly within budget. Both levels are
cached by content hash, so a grown conversation re-summarises only the chunk
that changed."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from ctxfold._core import Tokenizer
from ctxfold.engine.results import Item

__all__ = ["Chunk", "make_chunks", "movable_for_chunks", "chunk_marker", "transcript", "CHUNK_SIZE", "LEVEL2_SHARE"]

CHUNK_SIZE = 20
#: A level-2 summary keeps this share of the value of the level-1 summary.
LEVEL2_SHARE = 0.4


class Chunk(msgspec.Struct, kw_only=True):
    """A run of older messages the `multi_level` strategy summarises as one, at level 1 or 2, or drops."""

    indices: list[int]
    """The messages the chunk stands for (consecutive, no hard-protected one)."""
    text: str
    """The chunk's transcript, `role: text` per message: what is summarised."""
    targets: tuple[int, int]
    """Token targets of the level-1 and level-2 summaries."""
    markers: tuple[str, str] = ("", "")
    """The line that opens the chunk's level-1 and level-2 summary (`chunk_marker`), set by `make_chunks`."""
    level: int = 0
    """Chosen: 1 or 2, or 0 for dropped."""


def transcript(items: Sequence[Item]) -> str:
    """The items as ``role: text`` lines, the text a chunk summary is made from."""
    return "\n".join(f"{it.role}: {it.text}" for it in items if it.text)


def chunk_marker(chunk: Chunk, items: Sequence[Item], level: int) -> str:
    """The line a chunk's level-``level`` summary starts with: its size and first and last ids."""
    first, last = items[chunk.indices[0]].id, items[chunk.indices[-1]].id
    return f"[level-{level} summary of {len(chunk.indices)} messages, {first}..{last}] "


def make_chunks(
    items: Sequence[Item],
    movable: np.ndarray,
    groups: np.ndarray,
    tokenizer: Tokenizer,
    ratio: float,
    min_tokens: int,
    size: int = CHUNK_SIZE,
) -> list[Chunk]:
    """Chunks of about `size` consecutive movable messages. A chunk never
    ends between a tool call and its results, and a non-movable message
    (protected, or in the recent chunk) ends the chunk it interrupts."""
    runs: list[list[int]] = []
    current: list[int] = []
    for i in range(len(items)):
        if not movable[i]:
            if current:
                runs.append(current)
            current = []
            continue
        current.append(i)
        closes_group = groups[i] < 0 or i + 1 >= len(items) or groups[i + 1] != groups[i]
        if len(current) >= size and closes_group:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    chunks = []
    for run in runs:
        text = transcript([items[i] for i in run])
        tokens = int(tokenizer.count(text))
        first = max(min_tokens, int(tokens * ratio))
        chunk = Chunk(indices=run, text=text, targets=(first, max(min_tokens // 2, int(first * ratio))))
        chunk.markers = (chunk_marker(chunk, items, 1), chunk_marker(chunk, items, 2))
        chunks.append(chunk)
    return chunks


def movable_for_chunks(items: Sequence[Item], hard: np.ndarray, groups: np.ndarray, recent: int) -> np.ndarray:
    """What may go into a chunk: everything before the recent chunk that is
    not hard-protected, and no tool group that reaches into the recent chunk."""
    n = len(items)
    start = max(0, n - recent)
    movable: np.ndarray = ~hard.copy()
    movable[start:] = False
    reaching = {int(g) for g in groups[start:] if g >= 0} | {int(g) for g, h in zip(groups, hard) if h and g >= 0}
    for i in range(start):
        if groups[i] >= 0 and int(groups[i]) in reaching:
            movable[i] = False
    return movable
