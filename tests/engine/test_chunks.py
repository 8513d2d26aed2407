"""The multi_level strategy's chunks, on hand-made items: where chunks start
and end, what may go into one, their summary targets and their marker."""

from __future__ import annotations

import numpy as np

from ctxfold import Tokenizer
from ctxfold.engine.chunks import Chunk, chunk_marker, make_chunks, movable_for_chunks, transcript
from ctxfold.engine.results import Item

TOK = Tokenizer.from_encoding("cl100k_base")


def items(n: int) -> list[Item]:
    roles = ("user", "assistant")
    return [
        Item(id=f"m{i}", index=i, role=roles[i % 2], message={}, text=f"message number {i} about the trip", tokens=10)
        for i in range(n)
    ]


def no_groups(n: int) -> np.ndarray:
    return np.full(n, -1, dtype=np.int64)


def test_transcript_is_role_and_text_per_message_skipping_empty_ones() -> None:
    its = items(3)
    its[1].text = ""
    assert transcript(its) == "user: message number 0 about the trip\nuser: message number 2 about the trip"


def test_chunks_have_about_size_messages_and_the_rest_is_the_last_chunk() -> None:
    its = items(45)
    chunks = make_chunks(its, np.ones(45, dtype=bool), no_groups(45), TOK, 0.3, 10, size=20)
    assert [c.indices for c in chunks] == [list(range(0, 20)), list(range(20, 40)), list(range(40, 45))]
    assert chunks[0].text == transcript(its[:20]) and chunks[0].level == 0
    assert chunks[1].markers == (chunk_marker(chunks[1], its, 1), chunk_marker(chunks[1], its, 2))


def test_a_chunk_never_ends_between_a_tool_call_and_its_results() -> None:
    groups = no_groups(30)
    groups[18:23] = 4  # the call at 18, its results up to 22: the boundary at 20 falls inside
    chunks = make_chunks(items(30), np.ones(30, dtype=bool), groups, TOK, 0.3, 10, size=20)
    assert [c.indices for c in chunks] == [list(range(0, 23)), list(range(23, 30))]


def test_a_message_that_may_not_move_ends_the_chunk_it_interrupts() -> None:
    movable = np.ones(12, dtype=bool)
    movable[[4, 9]] = False
    chunks = make_chunks(items(12), movable, no_groups(12), TOK, 0.3, 10, size=20)
    assert [c.indices for c in chunks] == [[0, 1, 2, 3], [5, 6, 7, 8], [10, 11]]
    assert make_chunks(items(3), np.zeros(3, dtype=bool), no_groups(3), TOK, 0.3, 10) == []


def test_targets_are_the_ratio_of_the_transcript_and_of_level_one_with_floors() -> None:
    its = items(20)
    (chunk,) = make_chunks(its, np.ones(20, dtype=bool), no_groups(20), TOK, 0.3, 10, size=20)
    tokens = TOK.count(transcript(its))
    first = int(tokens * 0.3)
    assert first > 10  # the floor does not bind here
    assert chunk.targets == (first, max(5, int(first * 0.3)))
    # A small chunk gets the floors: min_tokens for level 1, half of it for level 2.
    (small,) = make_chunks(its[:2], np.ones(2, dtype=bool), no_groups(2), TOK, 0.3, 100, size=20)
    assert small.targets == (100, 50)


def test_the_recent_chunk_and_hard_protected_messages_are_not_movable() -> None:
    hard = np.zeros(10, dtype=bool)
    hard[2] = True
    movable = movable_for_chunks(items(10), hard, no_groups(10), recent=3)
    assert movable.tolist() == [True, True, False, True, True, True, True, False, False, False]
    assert not hard[3]  # the caller's mask is not changed


def test_a_tool_group_reaching_the_recent_chunk_or_a_protected_message_stays_out() -> None:
    groups = no_groups(12)
    groups[[5, 6, 10]] = 1  # a call at 5 whose last result is in the recent chunk
    groups[[1, 2]] = 2  # a call at 1 whose result at 2 is hard-protected
    hard = np.zeros(12, dtype=bool)
    hard[2] = True
    movable = movable_for_chunks(items(12), hard, groups, recent=3)
    assert np.flatnonzero(movable).tolist() == [0, 3, 4, 7, 8]


def test_the_marker_names_the_level_the_count_and_the_first_and_last_ids() -> None:
    its = items(8)
    chunk = Chunk(indices=[2, 3, 4], text=transcript(its[2:5]), targets=(20, 10))
    assert chunk_marker(chunk, its, 2) == "[level-2 summary of 3 messages, m2..m4] "
