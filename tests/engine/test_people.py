"""The names two people in a chat go by: what one calls the other, and a
question's other spelling of a speaker's name."""

from __future__ import annotations

import numpy as np
import pytest

from ctxfold import ContextEngine
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.config import EngineConfig
from ctxfold.engine.messages import parse_messages, people_in_chat
from ctxfold.engine.people import names_called, what_is_said, with_speakers_named, without_speakers
from ctxfold.engine.run import RunContext
from ctxfold.engine.scoring import score_items
from ctxfold.summarize.head_tail import HeadTailSummarizer
from ctxfold.tokens import get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")

# Elise calls Emi "Kate"; both speak of Miami, which ends sentences too.
CHAT = [
    ("Emi", "Hi! I just got back from Miami."),
    ("elise", "Hey Kate! How was it?"),
    ("Emi", "Great, the beach was lovely."),
    ("elise", "Those photos look amazing Kate!"),
    ("elise", "I love making paella on weekends, it's my favourite thing to cook."),
    ("Emi", "I love making lasagna on Sundays, it's my favourite thing to cook."),
    ("elise", "What are your plans for today Kate?"),
    ("Emi", "Reading, and a walk later. My friend Mike lives in Miami."),
    ("elise", "Sounds lovely, Kate."),
    ("elise", "I was in Miami last year, it was so hot in Miami."),
    ("elise", "Talk tomorrow Kate."),
    ("Emi", "Bye!"),
]


def chat_items(chat=CHAT):
    messages = [{"role": "user" if who == "Emi" else "assistant", "content": f"{who}: {text}"} for who, text in chat]
    items = parse_messages(messages, TOK)
    people = people_in_chat(items)
    assert people == ("Emi", "elise")
    return messages, items, people


def test_what_one_person_calls_the_other_is_found_and_a_place_is_not():
    _, items, people = chat_items()
    called = names_called(items, people, EngineCache())
    assert called == {"Emi": frozenset({"kate"}), "elise": frozenset()}
    # Said fewer times than an address needs, it is not taken for a name.
    _, fewer, _ = chat_items([c for c in CHAT if "Kate" not in c[1]] + [("elise", "Hey Kate!")])
    assert names_called(fewer, people, EngineCache())["Emi"] == frozenset()


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("What does Kate love making?", "What does Emi love making?"),
        ("What did Elise say about Kate's trip?", "What did Elise say about Emi's trip?"),
        # Another spelling of a speaker's name, never used in the chat.
        ("Where did Emmi go?", "Where did Emi go?"),
        ("Does Elisa like paella?", "Does elise like paella?"),
        # A name the chat uses is someone else; a stop word is no one's name.
        ("Where does Mike live?", "Where does Mike live?"),
        ("Will Emi cook?", "Will Emi cook?"),
        ("When was Miami hot?", "When was Miami hot?"),
    ],
)
def test_a_question_names_each_speaker_by_the_speakers_own_name(query, named):
    _, items, people = chat_items()
    assert with_speakers_named(query, items, people, EngineCache()) == named


def test_a_muhammad_is_a_muhhamed_and_an_aqib_an_akib():
    chat = [("Akib", "I drove to work for an hour today."), ("Muhhamed", "My commute takes forty minutes.")] * 3
    messages = [{"role": "user" if who == "Akib" else "assistant", "content": f"{who}: {text}"} for who, text in chat]
    items = parse_messages(messages, TOK)
    people = people_in_chat(items)
    for query, named in (("How long is Muhammad's commute?", "How long is Muhhamed's commute?"),
                         ("How long does Mohamed drive?", "How long does Muhhamed drive?"),
                         ("When did Aqib drive to work?", "When did Akib drive to work?")):
        assert with_speakers_named(query, items, people, EngineCache()) == named


def test_the_engine_keeps_what_the_person_a_question_calls_by_another_name_said(monkeypatch):
    messages, _, _ = chat_items()
    query = "What does Kate love making?"

    def kept_and_scores():
        result = ContextEngine(encoding="cl100k_base", embedder=None).optimize(messages, query=query, budget=40)
        scores = {m["content"].split()[4]: it.score for m, it in zip(messages, result.items) if "love making" in m["content"]}
        return [m["content"] for m in result.messages], scores

    kept, scores = kept_and_scores()
    assert any("lasagna" in text for text in kept) and not any("paella" in text for text in kept)
    assert scores["lasagna"] > scores["paella"]
    # Without the names, "Kate" is found only in what elise says: her cooking is kept.
    monkeypatch.setattr("ctxfold.engine.scoring.with_speakers_named", lambda query, *_: query)
    kept, scores = kept_and_scores()
    assert any("paella" in text for text in kept) and not any("lasagna" in text for text in kept)
    assert scores["lasagna"] <= scores["paella"]


@pytest.mark.parametrize(
    ("query", "left"),
    [
        ("What are Emi's hobbies?", "What are hobbies?"),
        ("What does Fahim Khan’s brother do?", "What does brother do?"),
        ("Which cities have both Emi and Elise been to?", "Which cities have both and been to?"),
        # Nothing but a name: the question stays whole.
        ("Emi?", "Emi?"),
    ],
)
def test_without_speakers_leaves_what_is_asked(query, left):
    assert without_speakers(query, ("Emi", "elise") if "Fahim" not in query else ("Fahim Khan", "Akib")) == left


class Recorder:
    """An embedder that remembers what it read."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def embed(self, texts):
        self.read.extend(texts)
        return np.eye(len(texts), 8, dtype=np.float32)


def test_the_dense_view_reads_what_is_asked_and_said_and_the_intent_layer_who():
    _, items, people = chat_items()
    recorder = Recorder()
    run = RunContext(tokenizer=TOK, config=EngineConfig(), cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                     embedder=recorder, budget=100, query="What does Kate love making?", people=people)
    _, layers = score_items(items, run)
    said = [text for _, text in CHAT]
    assert recorder.read[0] == "What does love making?"
    assert recorder.read[1:len(said) + 1] == said
    # Each message is read again after the one it follows.
    assert recorder.read[len(said) + 1:] == [said[0], *(f"{before} {text}" for before, text in zip(said, said[1:]))]
    # The question's person, found by the name elise calls her, is the intent layer's; the other's messages get none.
    assert layers["intent"].tolist() == [1.0 if who == "Emi" else 0.0 for who, _ in CHAT]


class DinnerEmbedder:
    """Vectors by topic: a text about dinner points one way, anything else another."""

    def embed(self, texts):
        return np.array([[1.0, 0.0] if "dinner" in t.lower() else [0.0, 1.0] for t in texts], dtype=np.float32)


def test_a_short_reply_is_read_after_the_message_it_follows():
    chat = [("Emi", "What are you having for dinner tonight?"), ("elise", "Vegetable soup."),
            ("Emi", "Nice. I went running by the lake."), ("elise", "The lake is lovely in spring."),
            ("Emi", "My sister moved to Lisbon."), ("elise", "Lisbon is beautiful.")]
    _, items, people = chat_items(chat)
    run = RunContext(tokenizer=TOK, config=EngineConfig(), cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                     embedder=DinnerEmbedder(), budget=100, query="What did elise eat for dinner?", people=people)
    semantic = score_items(items, run)[1]["semantic"]
    # "Vegetable soup." shares no word or topic with the question alone; after its question it is about dinner.
    assert semantic[1] > 0.5 and semantic[1] > semantic[2:].max()


def test_what_is_said_is_a_message_without_its_speakers_name():
    items = parse_messages([{"role": "user", "content": "  Kate Lee: Hi there"}, {"role": "assistant", "content": "Ben: hey"},
                            {"role": "user", "name": "Kate Lee", "content": "Kate Lee's turn: no opening"}], TOK)
    assert [what_is_said(it) for it in items] == ["Hi there", "hey", "Kate Lee's turn: no opening"]
