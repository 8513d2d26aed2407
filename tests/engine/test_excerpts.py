"""Excerpts: the sentences of a message that match the query, quoted as written."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold._core import Bm25
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.excerpts import EXCERPT_GAP, excerpt, query_weights, quotable_spans
from ctxfold.tokens import get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")

REPLY = (
    "Sure, here is the plan for the week. "
    "On Monday you could visit the harbour and the old market. "
    "The Hotel Aurora in Porto costs 120 euros a night and has a rooftop pool. "
    "Tuesday is best kept free for rest. "
    "Trains to Lisbon leave every hour from Campanha station."
)
CONVERSATION = [REPLY, "I like quiet hotels.", "What about Porto in spring?", "Lisbon trains are fast."]


def test_weights_are_the_query_terms_the_conversation_uses_rarer_ones_worth_more() -> None:
    weights = query_weights(CONVERSATION, "Which hotel in Porto had a rooftop pool?", EngineCache())
    assert set(weights) == {"hotel", "porto", "rooftop", "pool"}
    assert weights["rooftop"] > weights["porto"]  # one message names the rooftop, two name Porto
    assert query_weights(CONVERSATION, "unicorns and dragons", EngineCache()) == {}


def test_the_matching_sentence_comes_first_then_others_in_source_order() -> None:
    weights = query_weights(CONVERSATION, "Which hotel in Porto had a rooftop pool?", EngineCache())
    hotel = "The Hotel Aurora in Porto costs 120 euros a night and has a rooftop pool."
    tight = excerpt(REPLY, weights, TOK.count(hotel), TOK)
    assert tight == hotel
    roomier = excerpt(REPLY, weights, TOK.count(hotel) + 16, TOK)
    # The first sentence fits beside it and is quoted before it, as in the source.
    assert roomier == f"Sure, here is the plan for the week.{EXCERPT_GAP}{hotel}"
    adjacent = excerpt(REPLY, weights, TOK.count(REPLY) - 12, TOK)
    # Adjacent sentences keep the source's own separator between them.
    assert adjacent is not None and f"{hotel} Tuesday is best kept free for rest." in adjacent


def test_no_excerpt_when_nothing_matches_or_nothing_fits() -> None:
    assert excerpt(REPLY, query_weights(CONVERSATION, "unicorns", EngineCache()), 50, TOK) is None
    weights = query_weights(CONVERSATION, "rooftop pool", EngineCache())
    assert excerpt(REPLY, weights, 5, TOK) is None  # the matching sentence alone is longer
    assert excerpt(REPLY, weights, 0, TOK) is None


def test_sentences_worth_the_same_tie_in_source_order_in_every_process() -> None:
    # Two words for each weight, each sentence one of the two: the sentences
    # hold different terms of equal worth, which a sum in the order of a set
    # (the process's string hashing) rounds apart in the last bits.
    pairs = [("walrus", "ferret", 0.1), ("badger", "otter", 0.2), ("lemur", "marmot", 0.3),
             ("gecko", "heron", 0.7), ("bison", "moose", 1.1), ("camel", "llama", 1.3)]
    weights = {Bm25.tokenize(word)[0]: w for a, b, w in pairs for word in (a, b)}
    sentences = [" ".join(pair[pick] for pair, pick in zip(pairs, picks)).capitalize() + "."
                 for picks in itertools.islice(itertools.product((0, 1), repeat=len(pairs)), 0, 64, 5)]
    room = max(TOK.count(text) for text in sentences)
    for first in range(len(sentences)):
        order = sentences[first:] + sentences[:first]
        assert excerpt(" ".join(order), weights, room, TOK) == order[0]


CODE_REPLY = (
    "Here is how to retry the payment call with backoff.\n\n"
    "```python\n"
    "def pay(client, invoice):\n"
    "    for attempt in range(5):\n"
    "        try:\n"
    "            return client.charge(invoice)\n"
    "        except TimeoutError:\n"
    "            time.sleep(2 ** attempt)\n"
    "    raise RuntimeError(\"payment failed\")\n"
    "```\n\n"
    "The invoice is charged once because the charge is idempotent. Keep the retry count low."
)
BLOCK = CODE_REPLY[CODE_REPLY.index("```"):CODE_REPLY.rindex("```") + 3]


def test_a_code_block_is_quoted_whole_or_not_at_all() -> None:
    weights = query_weights([CODE_REPLY, "the weather in Paris"], "How did the payment retry raise an error?",
                            EngineCache())
    seen = set()
    for target in range(1, TOK.count(CODE_REPLY) + 5):
        out = excerpt(CODE_REPLY, weights, target, TOK)
        if out is None:
            continue
        # Never one fence without the other: the block is in whole or not at all.
        assert out.count("```") in (0, 2)
        assert out.count("```") == 0 or BLOCK in out
        seen.add(BLOCK in out)
    assert seen == {False, True}
    # A block left open runs to the end of the message and is one span with it.
    left_open = "Intro.\n```\ncode line\nNo closing fence."
    assert quotable_spans(left_open) == [(0, 6), (7, len(left_open))]


SENTENCES = st.lists(
    st.sampled_from(["The flight to Berlin leaves at nine.", "Invoice 42 is overdue!", "Python raised an error.",
                     "Status: ok.", "Why did the meeting move to Friday?", "Budget for the laptop is 900 euros.",
                     "\n```python\nbudget = invoice.total  # laptop\nraise Error(\"Berlin\")\n```\n"]),
    min_size=1, max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(SENTENCES, st.sampled_from([" ", "\n", "\n\n"]), st.sampled_from(["flight Berlin", "invoice", "laptop budget",
                                                                          "meeting Friday error"]),
       st.integers(1, 200))
def test_an_excerpt_fits_its_target_and_quotes_the_source(sentences, separator, query, target) -> None:
    body = separator.join(sentences)
    weights = query_weights([body, "Berlin invoice laptop meeting error"], query, EngineCache())
    out = excerpt(body, weights, target, TOK)
    if out is None:
        return
    assert TOK.count(out) <= target
    assert all(run in body for run in out.split(EXCERPT_GAP))
    assert out.count("```") % 2 == 0  # code blocks are quoted whole
    assert any(w in out.lower() for w in query.lower().split())
