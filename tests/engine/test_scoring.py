"""The scoring stage alone: score_items and its layers on crafted inputs."""

from __future__ import annotations

import datetime as dt
import math

import msgspec
import numpy as np
import pytest

from ctxfold import ContextEngine, InvalidInputError, StaticEmbedder, count_messages
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.config import DEFAULT_WEIGHTS, EngineConfig
from ctxfold.engine.messages import parse_messages, people_in_chat
from ctxfold.engine.results import LAYER_NAMES
from ctxfold.engine.run import RunContext
from ctxfold.engine.scoring import (
    TIME_WIDTH_DAYS, clauses_of, recalls_the_conversation, recency_applies, score_items, semantic_layer, topic_of,
)
from ctxfold.summarize.head_tail import HeadTailSummarizer
from ctxfold.tokens import get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")

CHAT = [
    {"role": "user", "content": "My dog Rex likes the park."},
    {"role": "assistant", "content": "Rex sounds lovely."},
    {"role": "user", "content": "I work in Berlin since 2019."},
    {"role": "assistant", "content": "Berlin is a great city."},
    {"role": "user", "content": "What is the weather like?"},
]


def scored(messages, query, weights=None, half_life=20.0, now=None, items=None):
    """Items, total scores and layers of `messages` (or of ready-made `items`) for `query`."""
    items = items if items is not None else parse_messages(messages, TOK)
    config = EngineConfig(weights=dict(weights or DEFAULT_WEIGHTS), half_life_turns=half_life)
    context = RunContext(tokenizer=TOK, config=config, cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                         embedder=None, budget=config.budget, query=query, people=people_in_chat(items), now=now)
    return items, *score_items(items, context)


def test_layers_are_all_there_and_total_is_their_weighted_sum():
    _, total, layers = scored(CHAT, "Where does Anna work in Berlin?")
    assert set(layers) == set(LAYER_NAMES)
    expected = sum(DEFAULT_WEIGHTS[name] * layers[name] for name in LAYER_NAMES)
    np.testing.assert_allclose(total, expected)
    for name in LAYER_NAMES:
        assert layers[name].shape == (len(CHAT),)
        assert layers[name].min() >= 0.0 and layers[name].max() <= 1.0


def test_entity_layer_rewards_the_messages_naming_the_querys_entity_by_rarity():
    # Entities of the query: anna (in no message), berlin (in 2 of 5).
    _, _, layers = scored(CHAT, "Where does Anna work in Berlin?")
    share = math.log(5 / 2) / math.log(5) / 2
    np.testing.assert_allclose(layers["entity"], [0, 0, share, share, 0])


def test_entity_in_every_message_singles_out_nothing():
    msgs = [{"role": "user", "content": f"Berlin note {k}"} for k in range(4)]
    _, _, layers = scored(msgs, "What about Berlin?")
    np.testing.assert_array_equal(layers["entity"], np.zeros(4))


def test_semantic_layer_best_match_scores_one_and_unrelated_zero():
    _, _, layers = scored(CHAT, "Where does Anna work in Berlin?")
    assert layers["semantic"][2] == 1.0  # "work" and "Berlin"
    assert 0 < layers["semantic"][3] < 1  # "Berlin" only
    assert layers["semantic"][0] == layers["semantic"][1] == layers["semantic"][4] == 0


@pytest.mark.parametrize(
    "query, topic",
    [
        ("Can you give me a comprehensive summary of how my garden project has progressed throughout our conversations?",
         "how my garden project has progressed ?"),
        ("Can you list the order in which I brought up the trips, in order?", "list the trips, ?"),
        ("Could you remind me what you said about the hotel?", "what you said about the hotel?"),
        ("What are Paola's hobbies?", "What are Paola's hobbies?"),
        # Saying it, not what was said: who mentioned or discussed it is the intent layer's.
        ("What dishes did Nicolas mention in their conversation?", "What dishes did Nicolas ?"),
        ("When did Fahim and Akib first discuss their interest in esports?", "When did Fahim and Akib their interest in esports?"),
        ("Based on the conversation, can we assume that Akib likes hiking?", ", Akib likes hiking?"),
        ("What can be inferred about Emi's taste in films?", "What about Emi's taste in films?"),
        # Nothing but framing: the query is all there is.
        ("Can you summarize our conversation?", "Can you summarize our conversation?"),
    ],
)
def test_topic_of_leaves_out_the_words_that_frame_a_question(query, topic):
    assert topic_of(query) == topic


@pytest.mark.parametrize(
    "topic, clauses",
    [
        ("how my tracker has progressed, including the key features, security enhancements, and documentation efforts?",
         ["how my tracker has progressed", "the key features", "security enhancements", "documentation efforts"]),
        ("I was looking back at our chess game, what move did you make after Kg2?",
         ["I was looking back at our chess game", "what move did you make after Kg2"]),
        # One word is not a clause; one clause is the question itself.
        ("What did I cook, again?", []),
        ("What are Paola's hobbies?", []),
    ],
)
def test_clauses_of_splits_a_question_of_several_parts(topic, clauses):
    assert clauses_of(topic) == clauses


class AspectEmbedder:
    """Vectors by concept: security (audits), documentation (docs), anything else."""

    def embed(self, texts):
        def vector(text):
            words = set(text.lower().replace(".", " ").split())
            return [float(bool(words & {"security", "audit"})), float(bool(words & {"documentation", "docs"})), 0.1]
        vectors = np.array([vector(t) for t in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_each_clause_of_a_question_is_also_read_alone():
    chat = [
        {"role": "user", "content": "We ran a login audit today."},
        {"role": "assistant", "content": "The docs pages are done."},
        {"role": "user", "content": "Audit and docs both finished."},
        {"role": "assistant", "content": "Lunch was nice."},
        {"role": "user", "content": "The weather is cold."},
    ]
    items = parse_messages(chat, TOK)
    run = RunContext(tokenizer=TOK, config=EngineConfig(), cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                     embedder=AspectEmbedder(), budget=100,
                     query="What came of the security checks, and of the documentation work?")
    semantic = score_items(items, run)[1]["semantic"]
    # Read whole, the question is about both at once and a message about one of
    # them scores half as high as the one about both; read by its clauses, each is found.
    assert semantic[2] == 1.0 and semantic[0] > 0.9 and semantic[1] > 0.9
    assert semantic[3] == semantic[4] == 0


def test_framing_words_rare_in_the_chat_do_not_outweigh_the_topic():
    chat = [
        {"role": "user", "content": "The tomatoes in my garden got blight this week."},
        {"role": "assistant", "content": "Here is a comprehensive summary of the meeting notes you pasted."},
        {"role": "user", "content": "Thanks. The garden needs a new fence too."},
        {"role": "assistant", "content": "A cedar fence would last."},
        {"role": "user", "content": "ok"},
    ]
    _, _, layers = scored(chat, "Can you give me a comprehensive summary of my garden?")
    semantic = layers["semantic"]
    assert semantic[1] == 0  # "comprehensive summary" is how it asks, not what about
    assert semantic[0] > 0 and semantic[2] > 0


def test_asking_who_mentioned_it_does_not_lift_the_messages_that_say_mention():
    chat = [
        {"role": "user", "content": "Nicolas: I made lasagna and a pot of chili yesterday."},
        {"role": "assistant", "content": "Nebraas: Did you mention the party to your boss in our last talk?"},
        {"role": "user", "content": "Nicolas: The chili was too spicy, the dishes took forever."},
        {"role": "assistant", "content": "Nebraas: I discussed it with him, no worries."},
    ]
    _, _, layers = scored(chat, "What dishes did Nicolas mention in their conversation?")
    semantic = layers["semantic"]
    assert semantic[1] == semantic[3] == 0  # they say "mention" and "discussed", not what about
    assert semantic[2] > 0


@pytest.mark.parametrize(
    "query, applies",
    [
        ("Continue the deploy", True),
        ("fix this error now", True),
        ("Where is my dog now?", True),
        ("What did I say about Berlin?", False),
        ("What is my dog called?", False),
        ("When did we move to Berlin", False),
        ("Have I used Flask in this project?", False),
        ("Can you list the order in which I brought up these topics?", False),
        ("What is the order of the trips I took this year?", False),
        ("What is the order of the arguments to this function?", True),
    ],
)
def test_recency_applies_to_the_present_task_not_to_a_past_question(query, applies):
    assert recency_applies(query) is applies


def test_recency_layer_decays_with_age_for_a_task_and_is_zero_for_a_past_question():
    _, _, task = scored(CHAT, "Continue with the plan", half_life=2.0)
    assert np.all(np.diff(task["recency"]) > 0)  # newer is higher
    # Equal importance, both past the boosted last two turns: one half-life older weighs half as much.
    assert task["recency"][0] == pytest.approx(task["recency"][2] / 2)
    _, _, past = scored(CHAT, "What did I say about Berlin?", half_life=2.0)
    np.testing.assert_array_equal(past["recency"], np.zeros(len(CHAT)))


DAYS = [
    {"role": "user", "content": "I bought a blender.", "timestamp": "2023-05-10T09:00:00"},
    {"role": "assistant", "content": "Enjoy the smoothies!", "timestamp": "2023-05-10T09:01:00"},
    {"role": "user", "content": "I bought a stand mixer to bake bread on weekends.", "timestamp": "2023-05-20T09:00:00"},
    {"role": "assistant", "content": "Happy baking!", "timestamp": "2023-05-20T09:01:00"},
    {"role": "user", "content": "I bought a toaster.", "timestamp": "2023-05-27T09:00:00"},
    {"role": "assistant", "content": "Nice.", "timestamp": "2023-05-27T09:01:00"},
]


def test_a_question_that_names_a_past_day_lifts_the_messages_said_near_it():
    items = parse_messages(DAYS, TOK)
    config = EngineConfig()
    context = RunContext(tokenizer=TOK, config=config, cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                         embedder=None, budget=config.budget, query="What did I buy 10 days ago?",
                         now=dt.datetime(2023, 5, 30, 12, 0))
    _, layers = score_items(items, context)
    # 10 days before May 30 is May 20: those messages score 1, the others less the farther they are.
    assert layers["recency"][2] == layers["recency"][3] == 1.0
    assert 0 < layers["recency"][0] < layers["recency"][4] < 1.0
    # Without the day the question names, a question about the past gets no time pull at all.
    plain = RunContext(tokenizer=TOK, config=config, cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                       embedder=None, budget=config.budget, query="What did I buy?",
                       now=dt.datetime(2023, 5, 30, 12, 0))
    np.testing.assert_array_equal(score_items(items, plain)[1]["recency"], np.zeros(len(DAYS)))
    # "Last year" says when something happened more than when it was said: no pull either.
    year = msgspec.structs.replace(plain, query="What did I buy last year?", now=dt.datetime(2024, 2, 1))
    np.testing.assert_array_equal(score_items(items, year)[1]["recency"], np.zeros(len(DAYS)))


@pytest.mark.parametrize("query", [
    "What did I buy on 20.05.2023?", "What did I buy on 2023-05-20?", "What did I buy on May 20, 2023?",
    "What did I buy on 20 May?", "What did I buy on the 20th of May?", "What did I buy on 5/20/2023?",
])
def test_a_question_that_names_a_date_lifts_the_messages_said_on_it(query):
    recency = scored(DAYS, query, now=dt.datetime(2023, 5, 30, 12, 0))[2]["recency"]
    assert recency[2] == recency[3] == 1.0
    assert 0 < recency[0] < recency[4] < 1.0


def test_a_message_that_names_the_asked_day_is_lifted_as_one_said_on_it():
    # Said on the 21st about "yesterday": the 20th, the day the question asks about.
    told = [*DAYS[:4], {"role": "user", "content": "Yesterday I bought a juicer.", "timestamp": "2023-05-24T09:00:00"}]
    noted = [msgspec.structs.replace(it, date_note=note) for it, note in zip(
        parse_messages(told, TOK), ["", "", "", "", "[said 2023-05-24; dates: yesterday = 2023-05-20]"])]
    question, now = "What did I buy on May 20?", dt.datetime(2023, 5, 30, 12, 0)
    recency = scored(told, question, now=now, items=noted)[2]["recency"]
    assert recency[4] == 1.0
    # Without the note it is four days off.
    plain = scored(told, question, now=now)[2]["recency"]
    assert plain[4] == pytest.approx(math.exp(-4 / TIME_WIDTH_DAYS))


@pytest.mark.parametrize(("ago", "bought"), [(10, "stand mixer"), (3, "toaster"), (20, "blender")])
def test_the_engine_keeps_what_was_said_on_the_day_the_question_names(ago, bought):
    # Only the question is protected, so the history is planned by value alone.
    engine = ContextEngine(encoding="cl100k_base", embedder=None,
                           config=EngineConfig(annotate_dates=False, protect_last=0))
    question = {"role": "user", "content": f"What did I buy {ago} days ago?"}
    # Room for the question and one purchase (the longest): the one the
    # date singles out, whatever matches "buy" better.
    budget = int(count_messages([DAYS[2], question], tokenizer=TOK)) + 2
    res = engine.optimize([*DAYS, question], budget=budget, now="2023-05-30T12:00:00")
    purchases = [m["content"] for m in res.messages if m["content"].startswith("I bought")]
    assert purchases == [next(m["content"] for m in DAYS if bought in m["content"])], purchases


def test_recency_follows_importance():
    msgs = [{"role": "user", "content": "a", "importance": 1.0}, {"role": "user", "content": "b", "importance": 0.0},
            {"role": "user", "content": "c"}]
    _, _, layers = scored(msgs, "go on")
    assert layers["recency"][0] > layers["recency"][1]


def test_intent_layer_points_at_the_speaker_the_query_asks_about():
    msgs = [{"role": "system", "content": "Be kind."}, *CHAT[:2]]
    _, _, mine = scored(msgs, "What is my dog called?")
    np.testing.assert_array_equal(mine["intent"], [1.0, 1.0, 0.5])
    _, _, yours = scored(msgs, "Remind me what you suggested for the park")
    np.testing.assert_array_equal(yours["intent"], [1.0, 0.5, 1.0])
    _, _, advised = scored(msgs, "How did you recommend I plan my walks?")
    np.testing.assert_array_equal(advised["intent"], [1.0, 0.5, 1.0])
    _, _, neutral = scored(msgs, "weather forecast")
    np.testing.assert_array_equal(neutral["intent"], [1.0, 0.5, 0.5])
    # A summary of how "my" plans went is what the conversation worked out: the assistant's turns.
    for question in ("Can you summarize how my walking plans developed?", "Give me an overview of my dog's training"):
        _, _, summary = scored(msgs, question)
        np.testing.assert_array_equal(summary["intent"], [1.0, 0.5, 1.0])


def test_structure_layer_role_cues_and_state_kinds():
    msgs = [
        {"role": "assistant", "content": "plain words"},
        {"role": "assistant", "content": "the build failed with an error"},
        {"role": "assistant", "content": "plain words again", "kind": "decision"},
        {"role": "user", "content": "We decided: must ship it? error"},
    ]
    _, _, layers = scored(msgs, "anything")
    np.testing.assert_allclose(layers["structure"], [0.5, 0.65, 1.0, 1.0])


def test_cross_reference_lifts_the_question_of_a_relevant_answer_and_a_tools_call():
    msgs = [
        {"role": "user", "content": "tell me something"},
        {"role": "assistant", "content": "The zeppelin hangar is in Friedrichshafen."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "zeppelin museum opening hours"},
        {"role": "user", "content": "unrelated"},
    ]
    _, _, layers = scored(msgs, "zeppelin hangar")
    sem, cross = layers["semantic"], layers["cross_reference"]
    assert sem[0] == 0 and sem[2] == 0
    assert cross[0] == pytest.approx(sem[1]) and cross[0] == 1.0
    assert cross[2] == pytest.approx(sem[3]) and cross[2] > 0
    assert cross[4] == 0


def test_empty_query_leaves_the_query_layers_zero():
    _, _, layers = scored(CHAT, "")
    for name in ("semantic", "entity", "cross_reference"):
        np.testing.assert_array_equal(layers[name], np.zeros(len(CHAT)))
    assert layers["recency"][-1] > 0  # no question: the current task


PEOPLE = [
    {"role": "user", "content": "Emi: I got back from Kyoto yesterday."},
    {"role": "assistant", "content": "Kate: How was it? I decided to go in spring."},
    {"role": "user", "content": "Emi: Rainy, but the temples were worth it?"},
    {"role": "assistant", "content": "Kate: My sister lives there."},
]


def test_between_people_intent_follows_the_person_the_query_names():
    items, _, layers = scored(PEOPLE, "Where does Kate's sister live?")
    assert list(layers["intent"]) == [0.0, 1.0, 0.0, 1.0]
    items, _, layers = scored(PEOPLE, "Did Kate and Emi both like Kyoto?")
    assert list(layers["intent"]) == [1.0] * 4
    items, _, layers = scored(PEOPLE, "What advice did Emi give Kate about Kyoto?")  # named apart: Kate is the object
    assert list(layers["intent"]) == [1.0, 0.5, 1.0, 0.5]
    items, _, layers = scored(PEOPLE, "What did I say about Kyoto?")  # names nobody: roles say nothing
    assert list(layers["intent"]) == [0.5] * 4


def test_between_people_structure_scores_nothing():
    _, _, layers = scored(PEOPLE, "Where does Kate's sister live?")
    assert not layers["structure"].any()
    _, _, layers = scored(CHAT, "Where does Rex play?")
    assert layers["structure"].all()


def test_between_people_a_reply_is_lifted_by_the_message_it_answers_whoever_speaks():
    chat = [
        {"role": "user", "content": "Nicolas: The bus was late again."},
        {"role": "assistant", "content": "Nebraas: What did you cook for dinner tonight?"},
        {"role": "user", "content": "Nicolas: Vegetable soup."},
        {"role": "assistant", "content": "Nebraas: Nice. Work was long."},
        {"role": "user", "content": "Nicolas: Same here."},
    ]
    query = "What did Nicolas cook for dinner?"
    _, _, layers = scored(chat, query)
    sem, cross = layers["semantic"], layers["cross_reference"]
    assert sem[1] == 1.0 and sem[2] < 1.0
    # The reply follows the other person's question (an assistant -> user
    # pair, which an assistant's chat does not read as an answer).
    assert cross[2] == 1.0
    assert cross[3] == max(sem[2], sem[4])
    _, _, plain = scored([{"role": m["role"], "content": m["content"].split(": ", 1)[1]} for m in chat], query)
    assert plain["cross_reference"][2] < 1.0


def test_between_people_a_reply_after_more_lines_of_the_asker_is_lifted_by_the_question():
    question = [
        {"role": "user", "content": "Nicolas: The bus was late again."},
        {"role": "assistant", "content": "Nebraas: What did you cook for dinner tonight?"},
        {"role": "assistant", "content": "Nebraas: I am starving."},
        {"role": "assistant", "content": "Nebraas: Work was long."},
    ]
    reply = [{"role": "user", "content": "Nicolas: Vegetable soup."}, {"role": "user", "content": "Nicolas: Same here."}]
    query = "What did Nicolas cook for dinner?"
    _, _, layers = scored([*question, *reply], query)
    sem, cross = layers["semantic"], layers["cross_reference"]
    assert sem[1] == 1.0 and sem[4] < 1.0
    # Two more lines of the asker come between the question and the reply.
    assert cross[4] == 1.0 and cross[1] == max(sem[0], sem[2], sem[4])
    # Three more are beyond REPLY_REACH: the reply answers those lines.
    more = [*question, {"role": "assistant", "content": "Nebraas: So tired."}, *reply]
    _, _, layers = scored(more, query)
    assert layers["cross_reference"][5] < 1.0


# -- two-stage ranking: a reranker over the first stage's short list ----------------------

DOCTOR_CHAT = [
    {"role": "user", "content": "The garden needs more tomatoes this year."},
    {"role": "assistant", "content": "Tomatoes like sun and regular water."},
    {"role": "user", "content": "Last week I finally saw Dr. Patel, an ENT specialist."},
    {"role": "assistant", "content": "Good that you went; how is your ear now?"},
    {"role": "user", "content": "My doctor appointment app keeps crashing."},
    {"role": "assistant", "content": "Try reinstalling the app."},
]
DOCTOR_QUERY = "Which doctor did I see?"


class TopicReranker:
    """Vectors by meaning the way a sentence model reads it: a text about a
    visit to a physician points one way, anything else another. Records
    every text it is asked to embed."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        visit = [("Patel" in t or "ENT" in t or t == DOCTOR_QUERY) for t in texts]
        return np.array([[1.0, 0.0] if v else [0.0, 1.0] for v in visit], dtype=np.float32)


def scored_with(messages, query, reranker, rerank):
    items = parse_messages(messages, TOK)
    config = EngineConfig(rerank=rerank)
    context = RunContext(tokenizer=TOK, config=config, cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                         embedder=None, reranker=reranker, budget=config.budget, query=query,
                         people=people_in_chat(items))
    return score_items(items, context)[1]


def test_rerank_lifts_the_answer_given_in_other_words():
    without = scored_with(DOCTOR_CHAT, DOCTOR_QUERY, TopicReranker(), rerank=0)["semantic"]
    assert int(np.argmax(without)) == 4  # BM25 alone: the message sharing the word "doctor"
    assert without[2] < 0.5
    with_rerank = scored_with(DOCTOR_CHAT, DOCTOR_QUERY, TopicReranker(), rerank=len(DOCTOR_CHAT))["semantic"]
    assert with_rerank[2] == pytest.approx(1.0)
    assert with_rerank[4] > 0  # the lexical match keeps its own score beside it
    assert with_rerank.min() >= 0.0 and with_rerank.max() <= 1.0


def test_rerank_embeds_only_the_first_stages_short_list():
    reranker = TopicReranker()
    first = scored_with(DOCTOR_CHAT, DOCTOR_QUERY, None, rerank=0)["semantic"]
    layers = scored_with(DOCTOR_CHAT, DOCTOR_QUERY, reranker, rerank=2)
    best_two = {DOCTOR_CHAT[i]["content"] for i in np.argsort(-first, kind="stable")[:2]}
    assert reranker.seen[0] == DOCTOR_QUERY and set(reranker.seen[1:]) == best_two and len(reranker.seen) == 3
    # Outside the short list nothing moves but for the common scale.
    outside = [i for i in range(len(DOCTOR_CHAT)) if DOCTOR_CHAT[i]["content"] not in best_two]
    assert all(layers["semantic"][i] <= first[i] + 1e-12 for i in outside)


def test_rerank_reads_the_question_with_the_question_embedder_when_given():
    texts = [m["content"] for m in DOCTOR_CHAT]
    alone = semantic_layer(texts, DOCTOR_QUERY, reranker=TopicReranker(), shortlist=len(texts))
    reranker, questions = TopicReranker(), TopicReranker()
    split = semantic_layer(texts, DOCTOR_QUERY, reranker=reranker, shortlist=len(texts), rerank_question=questions)
    assert questions.seen == [topic_of(DOCTOR_QUERY)] and sorted(reranker.seen) == sorted(texts)
    assert split == pytest.approx(alone)


def test_the_default_engine_embeds_the_question_once_for_both_views():
    engine = ContextEngine(encoding="cl100k_base")
    engine.optimize(DOCTOR_CHAT, query=DOCTOR_QUERY, budget=60)
    question = topic_of(DOCTOR_QUERY)
    assert question in engine.cache.query_embeddings  # read whole, by the question's view
    assert question not in engine.cache.rerank_embeddings  # and not again at the short list's cut
    assert all(m["content"] in engine.cache.rerank_embeddings for m in DOCTOR_CHAT)


def test_engine_rerank_embeds_each_message_once_and_keeps_vectors_in_the_store(tmp_path):
    from ctxfold import ContextEngine
    from ctxfold.memory import SqliteStore

    class Counting(TopicReranker):
        model_id = "topic-test"

    msgs = DOCTOR_CHAT * 4  # 24 messages, 6 distinct texts, all in the short list
    config = EngineConfig(rerank=30)
    with SqliteStore(tmp_path / "agent.db") as store:
        reranker = Counting()
        engine = ContextEngine(encoding="cl100k_base", config=config, reranker=reranker, store=store)
        engine.optimize(msgs, query=DOCTOR_QUERY, budget=60)
        first = len(reranker.seen)
        assert sorted(reranker.seen) == sorted([DOCTOR_QUERY, *(m["content"] for m in DOCTOR_CHAT)])
        engine.optimize([*msgs, {"role": "user", "content": "Dr. Patel said the ENT scan was clear."}],
                        query=DOCTOR_QUERY, budget=60)
        assert reranker.seen[first:] == ["Dr. Patel said the ENT scan was clear."]  # only the new message
    with SqliteStore(tmp_path / "agent.db") as store:  # a restarted process: the vectors come from the store
        again = Counting()
        ContextEngine(encoding="cl100k_base", config=config, reranker=again, store=store).optimize(
            msgs, query=DOCTOR_QUERY, budget=60)
        assert again.seen == []


def test_rerank_off_leaves_the_reranker_unused():
    from ctxfold import ContextEngine

    reranker = TopicReranker()
    engine = ContextEngine(encoding="cl100k_base", reranker=reranker, config=EngineConfig(rerank=0))
    engine.optimize(DOCTOR_CHAT, query=DOCTOR_QUERY, budget=60)
    assert engine.reranker is None and reranker.seen == []


def test_the_default_reranker_is_the_shared_minilm_reading_each_messages_opening():
    from ctxfold import ContextEngine
    from ctxfold.embed.projected import SharedEncoder

    engine = ContextEngine(encoding="cl100k_base")
    assert isinstance(engine.reranker.embedder, SharedEncoder)
    assert engine.reranker.embedder.max_length == EngineConfig().rerank_tokens == 64
    wide = ContextEngine(encoding="cl100k_base", config=EngineConfig.reranked())
    assert wide.reranker.embedder.max_length == 256
    assert engine.reranker.model_name != wide.reranker.model_name  # two cuts never share a stored vector


def test_lexical_scoring_runs_no_model_unless_a_reranker_is_given():
    from ctxfold import ContextEngine

    assert ContextEngine(encoding="cl100k_base", embedder=None).reranker is None
    reranker = TopicReranker()
    engine = ContextEngine(encoding="cl100k_base", embedder=None, reranker=reranker)
    engine.optimize(DOCTOR_CHAT, query=DOCTOR_QUERY, budget=60)
    assert reranker.seen and reranker.seen[0] == DOCTOR_QUERY


def test_a_reranker_without_embed_is_refused_naming_the_argument():
    from ctxfold import ContextEngine, InvalidTypeError

    with pytest.raises(InvalidTypeError, match="reranker"):
        ContextEngine(encoding="cl100k_base", reranker="bge")
    with pytest.raises(InvalidTypeError, match="reranker"):
        ContextEngine(encoding="cl100k_base", reranker=object())


@pytest.mark.parametrize(
    "query, recalls",
    [
        ("Have I mentioned my sister's name?", True),
        ("Can you list the order in which I brought up the parts of my project?", True),
        ("When is my Zoom call with the creative director scheduled?", True),
        ("What was the reconciled total of invoice 1042?", True),
        ("Remind me what you suggested for the backups.", True),
        ("What is the order of the six museums I visited, from earliest to latest?", True),
        # A question about the present task, a request, or a long message that reads on from an earlier answer.
        ("Which ports does the staging server listen on?", False),
        ("Continue the deploy", False),
        ("What is the order of the arguments to this function?", False),
        ("hmm, what happens if I want to add more tables later on?", False),
        ("Thanks! I think I'll set up my calendar. Can you help me plan the first week and the reviews?", False),
    ],
)
def test_recalls_the_conversation_only_for_questions_about_what_it_holds(query, recalls):
    assert recalls_the_conversation(query) is recalls


SICK = ["Did you see the game last night? It went to overtime.", "I have to finish my essay before Friday.",
        "Got a bit of an itchy throat", "My mom is visiting this weekend, so I'm cleaning the apartment.",
        "The new phone update drained my battery all day.", "We should try that new ramen place downtown.",
        "My cousin is getting married in June.", "I think I'll repaint my room blue."]


def test_the_default_engine_also_reads_the_question_with_minilm():
    from ctxfold.embed.projected import ProjectedEmbedder, SharedEncoder

    engine = ContextEngine(encoding="cl100k_base")
    assert isinstance(engine.model_view.question_embedder.embedder, SharedEncoder)
    assert isinstance(engine.model_view.projected, ProjectedEmbedder)
    for other in (ContextEngine(encoding="cl100k_base", config=EngineConfig(embed_query=False)),
                  ContextEngine(encoding="cl100k_base", embedder=None),
                  # Another embedder's space is not the table's: no second view.
                  ContextEngine(encoding="cl100k_base", embedder=StaticEmbedder())):
        assert other.model_view is None
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(SICK)]
    # Neither "sick" nor any word of it is in the answer: the table alone keeps other messages.
    kept = [m["content"] for m in engine.optimize(messages, query="When did he get sick?", budget=50).messages]
    assert SICK[2] in kept
    plain = ContextEngine(encoding="cl100k_base", config=EngineConfig(embed_query=False, rerank=0))
    assert SICK[2] not in [m["content"] for m in plain.optimize(messages, query="When did he get sick?", budget=50).messages]
    # The short list read by the model finds it without the question's second view.
    reread = ContextEngine(encoding="cl100k_base", config=EngineConfig(embed_query=False))
    assert SICK[2] in [m["content"] for m in reread.optimize(messages, query="When did he get sick?", budget=50).messages]
    with pytest.raises(InvalidInputError, match="embed_query"):
        EngineConfig(embed_query="yes")  # type: ignore[arg-type]
