"""segment_dialogue and dialogue_boundary_costs: the prior on where a dialogue
changes topic (each cue in a table), its scale, that segment_dialogue is
segment() with those costs, what the arc's topics use, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import ctxfold
from ctxfold import CtxFoldError, InvalidInputError, InvalidTypeError, dialogue_boundary_costs, segment, segment_dialogue
from ctxfold.text.arc import build_arc


def vectors(n: int, seed: int = 0, dim: int = 16) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def costs_of(texts: list[str], k: int = 2) -> np.ndarray:
    # One vector for every turn: the block comparison is then the same at every gap.
    same = np.tile(vectors(1), (len(texts), 1))
    return dialogue_boundary_costs(texts, same, k, terms=[["w"]] * len(texts))


NEUTRAL = "I went to the market on Sunday."


@pytest.mark.parametrize(
    ("before", "turn", "sign"),
    [
        ("Where do you live?", NEUTRAL, +1),  # an answer belongs with its question
        ("what college ? i study art .", NEUTRAL, +1),  # a question inside the turn
        ("Is there anything else I can help you with?", NEUTRAL, -1),  # a closing question
        ("Thanks, bye!", NEUTRAL, -1),  # a closing turn before
        (NEUTRAL, "What is your favourite season?", -1),  # a question opener
        (NEUTRAL, "No, that's all. Thank you for your help.", +1),  # a closing turn
        (NEUTRAL, "yes , i love it", +1),  # a reply
        (NEUTRAL, "That sounds lovely.", +1),
    ],
)
def test_each_cue_moves_the_cost_its_way(before: str, turn: str, sign: int) -> None:
    plain = costs_of([NEUTRAL, NEUTRAL, NEUTRAL])[2]
    cue = costs_of([NEUTRAL, before, turn])[2]
    assert np.sign(cue - plain) == sign, (before, turn, cue, plain)


def test_new_words_favour_a_boundary() -> None:
    same = np.tile(vectors(1), (3, 1))
    old = dialogue_boundary_costs(["a", "b", "c"], same, 2, terms=[["cat"], ["dog"], ["cat"]])
    new = dialogue_boundary_costs(["a", "b", "c"], same, 2, terms=[["cat"], ["dog"], ["boat"]])
    assert new[2] < old[2]
    # Without terms, the content words of the texts are read.
    got = dialogue_boundary_costs(["my cat sleeps", "the dog barks", "my cat purrs"], same, 2)
    assert got[2] > dialogue_boundary_costs(["my cat sleeps", "the dog barks", "sailing boats race"], same, 2)[2]


def test_alike_blocks_across_a_gap_cost_more() -> None:
    a, b = vectors(2, seed=3)
    v = np.array([a, a, a, b, b, b])
    costs = dialogue_boundary_costs([NEUTRAL] * 6, v, 2, terms=[["w"]] * 6)
    # The gap between the a-block and the b-block is the cheapest.
    assert int(np.argmin(costs[1:])) + 1 == 3


def test_costs_scale_with_the_mean_segment_length() -> None:
    texts = ["Where do you live?", "In Paris.", "Do you like cats?", "Yes I do.", "Bye!", "Hi there."]
    v = vectors(6, seed=1)
    two, three = dialogue_boundary_costs(texts, v, 2), dialogue_boundary_costs(texts, v, 3)
    assert two[0] == three[0] == 0.0
    np.testing.assert_allclose(two[1:], three[1:] * (3 / 2) ** 1.7)


def test_segment_dialogue_is_segment_with_the_costs() -> None:
    texts = [f"turn {i} about {'cats' if i < 7 else 'boats'}?" if i % 3 == 0 else f"reply {i}" for i in range(14)]
    v = vectors(14, seed=2)
    for k in (1, 2, 3, 5):
        costs = dialogue_boundary_costs(texts, v, k)
        want = segment(np.asarray(ctxfold.cosine_similarity(v.astype(np.float32)), dtype=np.float64), n_segments=k,
                       boundary_costs=costs)
        got = segment_dialogue(texts, v, k)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()


def test_an_answer_stays_with_its_question() -> None:
    # Cats, then sailing; the question opening the second topic sits between the two.
    a, b = vectors(2, seed=3)
    v = np.array([a, a, a, a, (a + b) / 2, b, b, b]) + 0.3 * vectors(8, seed=13)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    texts = ["I like cats.", "Cats are great.", "My cat sleeps.", "Cats purr.", "Do you sail?",
             "Yes, every weekend.", "The boat is fast.", "Sailing is fun."]
    # The similarities alone cut between the question and its answer.
    assert segment(np.asarray(ctxfold.cosine_similarity(v.astype(np.float32)), dtype=np.float64), n_segments=2).tolist() == [5]
    assert segment_dialogue(texts, v, 2).tolist() == [4]


def test_the_arc_topics_are_the_dialogue_segmentation() -> None:
    class Embed:
        def embed(self, texts: list[str]) -> np.ndarray:
            return vectors(len(texts), seed=len(texts))

    turns = ["Where is the station?", "Two blocks north.", "Thanks!", "Can you book a table for two?",
             "Done, for 8 pm.", "Great.", "What will the weather be?", "Sunny all day."]
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    arc = build_arc(messages, embedder=Embed(), n_topics=3)
    want = segment_dialogue(turns, Embed().embed(turns), 3).tolist()
    assert [t.start for t in arc.topics][1:] == want


def test_trivial_inputs() -> None:
    assert segment_dialogue([], np.zeros((0, 4)), 1).tolist() == []
    assert segment_dialogue(["hi"], vectors(1), 1).tolist() == []
    assert dialogue_boundary_costs(["hi"], vectors(1), 1).tolist() == [0.0]
    assert dialogue_boundary_costs(["a", "b", "c"], vectors(3), 1).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "fragment"),
    [
        (("hello", vectors(5), 2), {}, InvalidTypeError, "texts"),
        (([1, 2], vectors(2), 2), {}, InvalidTypeError, "texts[0]"),
        ((["a", "b"], vectors(3), 2), {}, InvalidInputError, "vectors"),
        ((["a", "b"], np.ones(2), 2), {}, InvalidInputError, "vectors"),
        ((["a", "b"], [["x"], ["y"]], 2), {}, InvalidTypeError, "vectors"),
        ((["a", "b"], vectors(2), 3), {}, InvalidInputError, "n_segments"),
        ((["a", "b"], vectors(2), 0), {}, InvalidInputError, "n_segments"),
        ((["a", "b"], vectors(2), True), {}, InvalidTypeError, "n_segments"),
        ((["a", "b"], vectors(2), 1.5), {}, InvalidTypeError, "n_segments"),
        ((["a", "b"], vectors(2), 2), {"terms": [["x"]]}, InvalidInputError, "terms"),
    ],
)
def test_bad_input_is_named(args, kwargs, error, fragment) -> None:
    for fn in (segment_dialogue, dialogue_boundary_costs):
        with pytest.raises(error) as info:
            fn(*args, **kwargs)
        assert fragment in str(info.value)
        assert isinstance(info.value, CtxFoldError)


def test_the_block_comparison_is_the_cosine_of_the_summed_neighbours() -> None:
    from ctxfold.text.dialogue import _alike_across

    v = vectors(7, seed=9) * np.arange(1, 8)[:, None]  # lengths differ: each turn counts as a unit vector
    unit = v / np.linalg.norm(v, axis=1, keepdims=True)
    want = []
    for g in range(1, 7):
        left, right = unit[max(0, g - 2) : g].sum(0), unit[g : g + 2].sum(0)
        want.append(left @ right / np.linalg.norm(left) / np.linalg.norm(right))
    np.testing.assert_allclose(_alike_across(v), want, rtol=1e-5)
