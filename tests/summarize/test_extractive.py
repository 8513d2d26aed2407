"""ExtractiveSummarizer: exact token targets, only source wording in source
order, names and numbers verbatim, filler pruning, query relevance, entity
coverage, and clear errors for bad input."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest
from ctxfold import (
    CtxFoldError,
    ExtractiveSummarizer,
    InvalidInputError,
    InvalidTypeError,
    Summarizer,
    get_tokenizer,
)
from ctxfold.summarize.extractive import (
    TermVectorEmbedder,
    entities,
    is_source_wording,
    prune_filler,
    split_sentences,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

O200K = get_tokenizer()
CL100K = get_tokenizer(encoding="cl100k_base")

CHAT = """user: I'm planning a trip to Lisbon with Maria in May. We have about 1200 euros for 5 days.
assistant: What a great plan! Lisbon is really lovely in May. Here are some ideas:

1. **Belém Tower**: A 16th-century fortress on the Tagus river, open from 10:00 to 17:30.
2. **Alfama**: The oldest district, with narrow streets and fado bars.
3. **Sintra**: A day trip by train (about 40 minutes) to palaces and gardens.

Additionally, I think the Lisboa Card is very useful: it costs 22 euros for 24 hours.
I hope this helps!
user: Thanks. Maria is vegetarian, and we land on 2024-05-14 at 9:15. Any restaurant tips?
assistant: Sure! For vegetarian food, try Ao 26 Vegan Food Project in Chiado, or Jardim das Cerejas near Rossio.
Basically, most places in Alfama also serve grilled vegetables and soups.
Remember to book Ao 26 a day ahead, since it fills up quickly on weekends.
user: Great. Should we rent a car for Sintra?
assistant: Honestly, no. The train from Rossio station runs every 20 minutes and costs 2.40 euros each way.
Parking in Sintra is very hard, and the roads to the Pena Palace are narrow.
"""

# A chat between two people: both speakers are named in labels, some names and numbers come back.
PEOPLE = """Emi: Hey Kevin! How are you?
Kevin: Good thanks Emi. How about you?
Emi: I just got back from Houston. The Lakewood Church there has 16,800 seats.
Kevin: Thank you Emi, that sounds fun. Say hi to Tom and Priya from me.
Emi: Lakewood Church is the largest church in the United States, and Houston was hot, 35 degrees every day.
Kevin: I played football with the team today and we won 3 to 1.
Emi: Nice! Was it the cup match?
Kevin: No, the cup match against Dallas is next Sunday. Our coach Maria says we can win the cup.
Emi: Tell Maria good luck from me. I'll watch the Dallas match on Sunday.
Kevin: How about you? Any plans for the weekend?
Emi: I'm cooking for my sister on Saturday, she loves lasagna.
"""

WORDS = "alpha beta gamma delta report budget meeting river garden train station coffee".split()
NAMES = ["Alice", "Bob", "Lisbon", "Zurich", "Pixel", "Acme"]


@st.composite
def documents(draw: st.DrawFn) -> str:
    """Texts of sentences with names, numbers and dates, some in speaker turns."""
    sentences = []
    for _ in range(draw(st.integers(1, 25))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=14))
        if draw(st.booleans()):
            words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(NAMES)))
        if draw(st.booleans()):
            words.append(str(draw(st.integers(0, 99999))))
        if draw(st.booleans()):
            words.insert(0, draw(st.sampled_from(["Actually,", "I think", "really", "**Note**:", "1."])))
        sentences.append(" ".join(words) + draw(st.sampled_from([".", "!", "?", "", " (an aside)."])))
    lines, i = [], 0
    while i < len(sentences):
        k = draw(st.integers(1, 4))
        prefix = draw(st.sampled_from(["", "user: ", "assistant: "]))
        lines.append(prefix + " ".join(sentences[i : i + k]))
        i += k
    return "\n".join(lines)


FAST = ExtractiveSummarizer(embedder=TermVectorEmbedder())


def test_is_a_summarizer_and_default_target_counting() -> None:
    s = ExtractiveSummarizer()
    assert isinstance(s, Summarizer)
    (out,) = s.summarize([CHAT], budget=60)
    assert 0 < O200K.count(out) <= 60
    assert is_source_wording(out, CHAT)


@given(text=documents(), target=st.integers(1, 120))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_output_within_target_and_made_of_source_wording(text: str, target: int) -> None:
    for summarizer, tok in ((FAST, O200K), (ExtractiveSummarizer(embedder=TermVectorEmbedder(), tokenizer=CL100K), CL100K)):
        (out,) = summarizer.summarize([text], target)
        assert tok.count(out) <= target
        assert is_source_wording(out, text), (out, text)
        if tok.count(text) > target and target >= 3:
            assert out.strip(), "a text over its target still gets a summary"


@given(text=documents(), target=st.integers(5, 80))
@settings(max_examples=30, deadline=None)
def test_chosen_sentences_are_in_source_order_and_traceable(text: str, target: int) -> None:
    ex = FAST.extract(text, target)
    indices = [i for i, _ in ex.chosen]
    assert indices == sorted(indices) and len(set(indices)) == len(indices)
    for (i, form), (start, end) in zip(ex.chosen, ex.spans):
        sentence = ex.sentences[i]
        assert text[start:end] == sentence.text
        kept = sentence.text if form == 0 else sentence.pruned
        assert is_source_wording(kept, sentence.text)
    assert ex.tokens == (O200K.count(ex.text) if ex.text else 0) <= target


CODE_REPLY = """Here is how to retry the payment call with backoff.

```python
def pay(client, invoice):
    for attempt in range(5):
        return client.charge(invoice)
```

The invoice is charged once because the charge is idempotent. Keep the retry count low.
"""


@pytest.mark.parametrize("target", [3, 8, 15, 25, 40, 60])
def test_a_summary_never_holds_a_code_fence_line(target: int) -> None:
    # A fence alone opens or closes a block the rest of the summary is not in.
    for query in (None, "payment retry code"):
        out = FAST.extract(CODE_REPLY, target, query).text
        assert "```" not in out, out
        assert out.strip()
    assert FAST.extract("```\n```", 5).text == "```"  # nothing else to say


def test_names_numbers_and_dates_survive_verbatim() -> None:
    number = re.compile(r"\d+(?:[.,:/-]\d+)*")
    in_source = set(number.findall(CHAT))
    s = ExtractiveSummarizer()
    for target in (40, 80, 160):
        (out,) = s.summarize([CHAT], target)
        assert set(number.findall(out)) <= in_source, out  # never cut inside a number or date
        assert set(entities(out)) <= set(entities(CHAT))
    # the names and numbers mentioned at least twice: most survive at 2.5x, all at under 2x
    counts: dict[str, int] = {}
    for e in entities(CHAT):
        counts[e] = counts.get(e, 0) + 1
    key = {e for e, n in counts.items() if n >= 2}
    assert len(key & set(entities(s.summarize([CHAT], 120)[0]))) >= 0.75 * len(key)
    assert key <= set(entities(s.summarize([CHAT], 160)[0]))


def test_entity_coverage_raises_recall() -> None:
    def recall(out: str) -> float:
        counts: dict[str, int] = {}
        for e in entities(CHAT):
            counts[e] = counts.get(e, 0) + 1
        key = {e for e, n in counts.items() if n >= 2}
        return len(key & set(entities(out))) / len(key)

    plain = ExtractiveSummarizer(entity_weight=0.0).summarize([CHAT], 90)[0]
    covering = ExtractiveSummarizer(entity_weight=2.0).summarize([CHAT], 90)[0]
    assert recall(covering) >= recall(plain)


def test_a_chat_is_summarised_by_what_it_keeps_naming() -> None:
    sentences = split_sentences(PEOPLE)
    assert {s.speaker for s in sentences} == {"Emi", "Kevin"}
    _, _, weights = ExtractiveSummarizer()._entity_matrices(sentences)
    found = list(dict.fromkeys(e for s in sentences for e in entities(s.text)))
    weight = dict(zip(found, weights.tolist()))
    assert weight["Kevin"] == weight["Emi"] == 0.0  # the labels carry the speakers' names
    assert weight["Tom"] == weight["Priya"] == 0.0  # named once, in a chat that repeats other names
    assert weight["Houston"] > 0 and weight["Maria"] > 0 and weight["Dallas"] > 0
    (out,) = ExtractiveSummarizer().summarize([PEOPLE], 45)
    assert {"Houston", "Lakewood", "Maria", "Dallas", "Sunday"} <= set(entities(out))


def test_single_mentions_count_when_nothing_repeats() -> None:
    sentences = split_sentences("I met Sarah in Lisbon. We ate at a small cafe near the river. The rain stopped at 9.")
    _, _, weights = ExtractiveSummarizer()._entity_matrices(sentences)
    assert len(weights) == 3 and (weights > 0).all()


def test_sentences_without_content_are_never_chosen() -> None:
    # "How about you?" has no content word and no name: it says nothing once out of its exchange
    for target in range(4, 186, 3):
        (out,) = ExtractiveSummarizer().summarize([PEOPLE], target)
        assert "How about you?" not in out and "How are you?" not in out
    (only,) = ExtractiveSummarizer(always_summarize=True).summarize(["How about you? How are you?"], 4)
    assert only  # when nothing else is there, something is still kept


def test_term_weight_blends_the_text_own_vocabulary() -> None:
    def plan(weight: float, budget: int) -> list[tuple[int, int]]:
        return ExtractiveSummarizer(term_weight=weight).extract(CHAT, budget).chosen

    # at some budgets both weightings pick the same sentences; not at most of them
    budgets = (50, 60, 70, 80, 90)
    assert sum(plan(0.0, b) != plan(1.0, b) for b in budgets) >= 3
    for w in (0.0, 0.85, 1.0):
        out = ExtractiveSummarizer(term_weight=w).extract(CHAT, 60)
        assert out.tokens <= 60 and is_source_wording(out.text, CHAT)


def test_query_pulls_in_the_relevant_sentence() -> None:
    s = ExtractiveSummarizer(query_weight=3.0)
    (out,) = s.summarize([CHAT], 45, query="vegetarian restaurant")
    assert "vegetarian" in out.lower()
    (out,) = s.summarize([CHAT], 45, query="train to Sintra price")
    assert "Sintra" in out


def test_filler_is_pruned_not_reworded() -> None:
    assert prune_filler("I hope this helps!") == ""
    assert prune_filler("Additionally, I think the Lisboa Card is very useful.") == "the Lisboa Card is useful."
    assert prune_filler("1. **Alfama**: The oldest district.") == "1. Alfama: The oldest district."
    assert prune_filler("Tomatoes are a fruit (yes, really!).") == "Tomatoes are a fruit."
    assert prune_filler("Meet at Gate 12 (Terminal 2).") == "Meet at Gate 12 (Terminal 2)."  # asides with names/numbers stay
    assert prune_filler("The Super Bowl is in February.") == "The Super Bowl is in February."
    for sentence in ("Honestly, no.", "Basically, most places in Alfama also serve soups.", "It's just 5 euros."):
        pruned = prune_filler(sentence)
        assert is_source_wording(pruned, sentence) and len(pruned) < len(sentence)


def test_pruned_forms_let_more_content_in() -> None:
    whole = ExtractiveSummarizer(forms="whole").extract(CHAT, 70)
    both = ExtractiveSummarizer(forms="both").extract(CHAT, 70)
    assert both.objective >= whole.objective - 1e-9
    assert any(form == 1 for _, form in ExtractiveSummarizer(forms="pruned").extract(CHAT, 70).chosen)


def test_sentences_turns_and_labels() -> None:
    sentences = split_sentences(CHAT)
    assert sentences[0].speaker == "user" and sentences[0].text.startswith("I'm planning")
    assert any(s.text.startswith("1. **Belém Tower**") for s in sentences)  # list markers do not end sentences
    assert all(CHAT[s.start : s.end] == s.text for s in sentences)
    turns = [s.turn for s in sentences]
    assert turns == sorted(turns) and max(turns) == 5
    (out,) = ExtractiveSummarizer().summarize([CHAT], 80)
    for line in out.splitlines():
        if ":" in line.split(" ")[0]:
            assert line.split(":")[0] in ("user", "assistant", "1", "2", "3")
    assert out.startswith(("user: ", "assistant: "))


def test_text_that_fits_is_unchanged_and_always_summarize() -> None:
    short = "user: Hello there.\nassistant: Hi! How can I help?"
    assert ExtractiveSummarizer().summarize([short], 100) == [short]
    (out,) = ExtractiveSummarizer(always_summarize=True).summarize([short], 100)
    assert is_source_wording(out, short) and O200K.count(out) <= 100


def test_several_texts_targets_and_async() -> None:
    s = ExtractiveSummarizer()
    texts = [CHAT, CHAT.replace("Lisbon", "Porto"), "One short text."]
    out = s.summarize(texts, [30, np.int64(50), 10])
    assert [O200K.count(o) <= n for o, n in zip(out, (30, 50, 10))] == [True, True, True]
    assert out[2] == "One short text."
    assert asyncio.run(s.asummarize(texts, [30, 50, 10])) == out


def test_deterministic() -> None:
    s = ExtractiveSummarizer()
    assert s.summarize([CHAT], 50) == s.summarize([CHAT], 50) == ExtractiveSummarizer().summarize([CHAT], 50)


def test_tiny_target_and_one_long_sentence() -> None:
    long_sentence = "The quarterly report for Acme lists " + ", ".join(f"item {i}" for i in range(200)) + "."
    for target in (1, 3, 10):
        (out,) = ExtractiveSummarizer().summarize([long_sentence], target)
        assert 0 < O200K.count(out) <= target and long_sentence.startswith(out)


def test_embedder_choice() -> None:
    from ctxfold.summarize.extractive import default_embedder

    assert callable(default_embedder().embed)
    vectors = TermVectorEmbedder().embed(["red apples", "green apples", "", "trains"])
    assert vectors.shape[0] == 4 and np.allclose(np.linalg.norm(vectors[[0, 1, 3]], axis=1), 1.0)
    assert not vectors[2].any()

    class Fixed:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.eye(len(texts), 8, dtype=np.float32)[:, :8] if len(texts) <= 8 else np.ones((len(texts), 8))

    (out,) = ExtractiveSummarizer(embedder=Fixed()).summarize(["A one. B two. C three."], 3)
    assert O200K.count(out) <= 3


@pytest.mark.parametrize(
    ("texts", "target", "error", "words"),
    [
        ([""], 10, InvalidInputError, "empty"),
        (["   \n "], 10, InvalidInputError, "empty"),
        ([CHAT], 0, InvalidInputError, "positive"),
        ([CHAT], -5, InvalidInputError, "positive"),
        ([CHAT], 2.5, InvalidTypeError, "budget"),
        ([CHAT], True, InvalidTypeError, "budget"),
        ([CHAT], [10, 20], InvalidInputError, "one per text"),
        (CHAT, 10, InvalidTypeError, "wrap it in a list"),
        ([b"bytes"], 10, InvalidTypeError, "texts[0]"),
        ([None], 10, InvalidTypeError, "texts[0]"),
        (42, 10, InvalidTypeError, "texts"),
    ],
)
def test_bad_input_raises_clear_errors(texts: object, target: object, error: type, words: str) -> None:
    with pytest.raises(error, match=re.escape(words)) as info:
        ExtractiveSummarizer().summarize(texts, target)  # type: ignore[arg-type]
    assert isinstance(info.value, CtxFoldError)


def test_bad_arguments() -> None:
    with pytest.raises(InvalidTypeError, match="embedder"):
        ExtractiveSummarizer(embedder="minilm")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="forms"):
        ExtractiveSummarizer(forms="sentences")
    with pytest.raises(InvalidInputError, match="entity_weight"):
        ExtractiveSummarizer(entity_weight=-1)
    with pytest.raises(InvalidInputError, match="term_weight"):
        ExtractiveSummarizer(term_weight=1.5)
    with pytest.raises(InvalidInputError, match="term_weight"):
        ExtractiveSummarizer(term_weight=-0.1)
    with pytest.raises(InvalidTypeError, match="query_weight"):
        ExtractiveSummarizer(query_weight="high")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="query"):
        ExtractiveSummarizer().summarize([CHAT], 10, query=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="text"):
        ExtractiveSummarizer().extract(["a list"], 10)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="empty"):
        ExtractiveSummarizer().extract("", 10)
    with pytest.raises(InvalidInputError, match="positive"):
        ExtractiveSummarizer().extract(CHAT, 0)

    class Broken:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.full((len(texts), 4), np.nan)

    with pytest.raises(InvalidInputError, match="embedder"):
        ExtractiveSummarizer(embedder=Broken()).summarize([CHAT], 20)
