"""ContextEngine.optimize: always within budget (hypothesis), valid chat
messages (roles legal, tool pairs intact), protected messages verbatim,
restore byte-identical, and every documented error."""

from __future__ import annotations

import asyncio

import pytest

import ctxfold
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_checks import must_be_present
from ctxfold import (
    BudgetError,
    ContextEngine,
    EngineConfig,
    InvalidInputError,
    InvalidTypeError,
    count_messages,
)

WORDS = "alpha beta gamma delta berlin office meeting budget dog rex laptop python error deploy friday 42 2023".split()
ENGINE = ContextEngine(encoding="cl100k_base")


@st.composite
def conversations(draw):
    n = draw(st.integers(1, 30))
    msgs = []
    call = 0
    for i in range(n):
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "tool_pair"]))
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=120))
        text = " ".join(words)
        if kind == "tool_pair":
            call += 1
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{call}", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}]})
            msgs.append({"role": "tool", "tool_call_id": f"c{call}", "content": text * draw(st.integers(1, 5))})
        else:
            msgs.append({"role": kind, "content": text, "importance": draw(st.floats(0, 1))})
    if draw(st.booleans()):
        msgs.insert(0, {"role": "system", "content": "You are helpful."})
    return msgs


def check_valid(messages) -> None:
    open_calls: set[str] = set()
    for m in messages:
        assert set(m) <= {"role", "content", "name", "tool_calls", "tool_call_id"}
        assert m["role"] in {"system", "developer", "user", "assistant", "tool"}
        for c in m.get("tool_calls") or ():
            open_calls.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls


def fitted(engine, msgs, budget, **kwargs):
    """`engine.optimize(...)` checked to fit exactly and be valid; None when the
    budget is infeasible, which only protected content and the current turn may make it."""
    try:
        res = engine.optimize(msgs, budget=budget, **kwargs)
    except BudgetError:
        needed = count_messages(must_be_present(msgs), encoding="cl100k_base")
        assert needed > budget, "only protected content and the current turn may make a budget infeasible"
        return None
    assert res.tokens <= budget
    assert res.tokens == count_messages(res.messages, encoding="cl100k_base")
    check_valid(res.messages)
    assert len(res.items) == len(msgs)
    return res


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(40, 3000))
def test_output_always_fits_and_is_valid(msgs, budget) -> None:
    res = fitted(ENGINE, msgs, budget)
    if res is None:
        return
    for m in msgs:
        if m["role"] == "system":
            assert m["content"] in [x.get("content") for x in res.messages]


@st.composite
def chats_between_people(draw):
    """Two named people taking turns (the engine's people mode), with a separate
    question about either of them."""
    people = draw(st.sampled_from([("Emi", "Kate Lee"), ("ana", "Bo")]))
    msgs = []
    for i in range(draw(st.integers(2, 40))):
        who = draw(st.sampled_from([0, 1]))
        words = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=60)))
        msgs.append({"role": ("user", "assistant")[who], "content": f"{people[who]}: {words}"})
    query = f"What did {draw(st.sampled_from(people)).split()[0]} say about {draw(st.sampled_from(WORDS))}?"
    return msgs, query


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chats_between_people(), st.integers(40, 2000))
def test_chats_between_people_fit_and_stay_valid(chat, budget) -> None:
    from ctxfold.engine.messages import parse_messages, people_in_chat

    msgs, query = chat
    if len({m["role"] for m in msgs}) == 2:
        assert people_in_chat(parse_messages(msgs, ctxfold.get_tokenizer(encoding="cl100k_base"))) is not None
    res = fitted(ENGINE, msgs, budget, query=query)
    if res is None:
        return
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user") if any(
        m["role"] == "user" for m in msgs) else None
    if last_user is not None:
        assert res.items[last_user].status != "dropped"


def test_everything_kept_when_it_fits() -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    res = ENGINE.optimize(msgs, budget=1000)
    assert res.messages == msgs and res.report.strategy == "full"
    assert [i.status for i in res.items] == ["kept", "kept"]
    assert res.report.compression_ratio == 1.0


def long_history():
    msgs = [{"role": "system", "content": "You are a careful assistant."}]
    for i in range(40):
        msgs.append({"role": "user", "content": f"Question {i} about the weather in city number {i}. " * 8, "id": f"u{i}"})
        msgs.append({"role": "assistant", "content": f"Answer {i}: it will be sunny with {i} degrees. " * 8, "id": f"a{i}"})
    msgs.append({"role": "user", "content": "My passport number is X123 and I fly to Oslo on Friday.", "pinned": True, "id": "pin"})
    msgs.append({"role": "user", "content": "What did you say about city number 7?", "id": "q"})
    return msgs


def test_protected_verbatim_relevant_kept_and_restore_is_exact() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    msgs = long_history()
    res = engine.optimize(msgs, budget=600)
    contents = [m["content"] for m in res.messages]
    assert msgs[0]["content"] in contents and msgs[-2]["content"] in contents and msgs[-1]["content"] in contents
    status = {i.id: i.status for i in res.items}
    assert status["a7"] == "kept" or status["u7"] == "kept"
    removed = [i.id for i in res.items if i.status != "kept"]
    assert removed
    by_id = {m.get("id"): m for m in msgs}
    for item_id in removed:
        assert engine.restore(item_id) == by_id[item_id]
    report = res.report.to_dict()
    assert report["tokens_out"] == res.tokens and report["counts"]["kept"] > 0
    assert "strategy optimal" in res.report.to_text()
    assert set(res.items[5].layers) == {"semantic", "entity", "recency", "intent", "structure", "cross_reference"}


def test_long_final_message_never_makes_a_small_budget_fail() -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "word " * 5000}]
    res = ENGINE.optimize(msgs, budget=100)
    assert res.tokens <= 100


def test_tool_results_go_with_their_call() -> None:
    msgs = [{"role": "user", "content": "search"}]
    for k in range(10):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k} " * 200})
    msgs.append({"role": "user", "content": "what was result 3?"})
    res = ENGINE.optimize(msgs, budget=500)
    check_valid(res.messages)
    assert res.tokens <= 500
    cleared = [i for i in res.items if i.status == "cleared"]
    for it in cleared:
        assert it.role == "tool"


def test_async_twin() -> None:
    res = asyncio.run(ENGINE.aoptimize(long_history(), budget=700))
    assert res.tokens <= 700


def test_system_argument_and_query_default() -> None:
    res = ENGINE.optimize([{"role": "user", "content": "hello"}], system="Be brief.", budget=100)
    assert res.messages[0] == {"role": "system", "content": "Be brief."}


def test_anthropic_blocks_are_accepted() -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "5 C"}]},
    ]
    res = ENGINE.optimize(msgs, budget=500)
    check_valid(res.messages)
    assert res.messages[1]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'
    assert res.messages[2] == {"role": "tool", "tool_call_id": "t1", "content": "5 C"}


@pytest.mark.parametrize(
    ("messages", "kwargs", "error", "words"),
    [
        ([{"content": "x"}], {}, InvalidInputError, ["messages[0]", "role"]),
        ([{"role": "robot", "content": "x"}], {}, InvalidInputError, ["messages[0]", "robot"]),
        ([{"role": "tool", "content": "x"}], {}, InvalidInputError, ["tool_call_id"]),
        ([{"role": "user", "content": "x", "id": "a"}, {"role": "user", "content": "y", "id": "a"}], {}, InvalidInputError, ["messages[1]", "'a'"]),
        ([{"role": "user", "content": "x", "timestamp": "yesterday"}], {}, InvalidInputError, ["timestamp", "ISO"]),
        ([{"role": "user", "content": "x", "importance": 3}], {}, InvalidInputError, ["importance"]),
        ([{"role": "user", "content": "x", "pinned": "yes"}], {}, InvalidTypeError, ["pinned"]),
        ("not messages", {}, InvalidTypeError, ["messages"]),
        ([{"role": "user", "content": "x"}], {"budget": 2}, InvalidInputError, ["budget"]),
        ([{"role": "user", "content": "x"}], {"budget": "10"}, InvalidTypeError, ["budget"]),
        ([{"role": "user", "content": "x"}], {"query": 5}, InvalidTypeError, ["query"]),
        ([{"role": "system", "content": "rule " * 400}, {"role": "user", "content": "x"}], {"budget": 50}, BudgetError, ["budget", "over"]),
    ],
)
def test_errors_say_which_message_and_why(messages, kwargs, error, words) -> None:
    with pytest.raises(error) as raised:
        ENGINE.optimize(messages, **kwargs)
    for word in words:
        assert word in str(raised.value)


def test_restore_unknown_id() -> None:
    with pytest.raises(InvalidInputError, match="item_id"):
        ContextEngine().restore("nope")


def test_should_compact_and_warnings() -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(context_window=1000))
    small = [{"role": "user", "content": "hi"}]
    big = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "line of output " * 800}]
    assert not engine.should_compact(small) and engine.should_compact(big)
    res = engine.optimize(big, budget=5000)
    assert any("tool result" in w for w in res.report.warnings)


@pytest.mark.parametrize("strategy", ["windowed", "compacted", "multi_level", "auto", "full", "optimal"])
def test_every_strategy_fits_and_keeps_protected(strategy) -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy=strategy))
    msgs = long_history()
    for budget in (600, 1500, 3000):
        res = engine.optimize(msgs, budget=budget)
        assert res.tokens <= budget
        check_valid([m for m in res.messages])
        contents = [m["content"] for m in res.messages]
        assert msgs[0]["content"] in contents and msgs[-2]["content"] in contents


def test_windowed_keeps_recent_verbatim_and_summarises_older() -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy="windowed"))
    res = engine.optimize(long_history(), budget=2500)
    statuses = [i.status for i in res.items[1:-2]]
    assert res.report.strategy == "windowed"
    newest_kept = max(k for k, s in enumerate(statuses) if s == "kept")
    assert all(s != "kept" for s in statuses[: newest_kept // 2])  # nothing old survives verbatim
    assert "summarized" in statuses


def test_compacted_marks_gaps() -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy="compacted"))
    res = engine.optimize(long_history(), budget=1500)
    assert res.report.strategy == "compacted"
    markers = [m for m in res.messages if m["role"] == "system" and "messages omitted" in m["content"]]
    assert markers and res.tokens <= 1500


def test_auto_picks_by_pressure() -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy="auto"))
    msgs = long_history()
    total = engine.count(msgs)
    assert engine.optimize(msgs, budget=total + 10).report.strategy == "full"
    assert engine.optimize(msgs, budget=int(total / 1.5)).report.strategy == "windowed"
    assert engine.optimize(msgs, budget=int(total / 3)).report.strategy == "compacted"
    assert engine.optimize(msgs, budget=int(total / 8)).report.strategy == "multi_level"


def test_multi_level_summarises_chunks_at_two_levels_and_caches_them() -> None:
    from ctxfold import CallableSummarizer

    calls: list[str] = []

    def shorten(prompt: str) -> str:
        calls.append(prompt)
        return "gist"

    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy="multi_level"),
                           summarizer=CallableSummarizer(shorten))
    msgs = long_history()
    res = engine.optimize(msgs, budget=3000)
    assert res.report.strategy == "multi_level" and res.tokens <= 3000
    check_valid(res.messages)
    chunk_summaries = [m["content"] for m in res.messages if m["content"].startswith("[level-")]
    assert chunk_summaries, "older messages should stand as chunk summaries"
    assert any(s.startswith("[level-2") for s in chunk_summaries)  # the budget forces some to level 2
    # The newest 20 messages (the recent chunk) are verbatim, and so are the protected ones.
    contents = [m["content"] for m in res.messages]
    assert all(m["content"] in contents for m in msgs[-20:]) and msgs[0]["content"] in contents
    # Every message of a summarised chunk is reported summarised and can be restored.
    summarised = [it for it in res.items if it.status == "summarized"]
    assert summarised and all("chunk summary" in it.reason for it in summarised)
    assert engine.restore(summarised[0].id)["content"] == next(m for m in msgs if m.get("id") == summarised[0].id)["content"]
    # Summaries are cached: the same call again summarises nothing.
    before = len(calls)
    engine.optimize(msgs, budget=3000)
    assert len(calls) == before


def test_summaries_are_cached_by_content() -> None:
    from ctxfold import CallableSummarizer

    calls: list[str] = []

    def shorten(prompt: str) -> str:
        calls.append(prompt)
        return "short summary"

    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy="windowed"),
                           summarizer=CallableSummarizer(shorten))
    msgs = long_history()
    before = engine.optimize(msgs, budget=2500)
    first = len(calls)
    assert first > 0
    engine.optimize(msgs, budget=2500)
    assert len(calls) == first  # the same history: every summary comes from the cache
    after = engine.optimize(msgs + [{"role": "assistant", "content": "ok"}], budget=2500)
    # A message the summarizer shortened for the first plan and shortened again
    # in the second is not sent to it again.
    text = {m["id"]: m["content"].strip() for m in msgs if "id" in m}
    sent_first, sent_after = "\n".join(calls[:first]), "\n".join(calls[first:])
    again = [i for i in ({it.id for it in before.items if it.status == "summarized"}
                         & {it.id for it in after.items if it.status == "summarized"}) if text[i] in sent_first]
    assert again
    assert not [i for i in again if text[i] in sent_after]


def test_layers_are_sized_and_ordered() -> None:
    msgs = long_history()
    layers = {
        "identity": "You are Ada, the travel assistant of ACME.",
        "preferences": "The user prefers window seats.",
        "knowledge": ["Oslo airport code is OSL.", "Flights to Oslo leave at 9:00."],
        "entity": ["Oslo: capital of Norway."],
    }
    res = ENGINE.optimize(msgs, budget=3000, layers=layers)
    assert res.tokens <= 3000
    roles = [m["role"] for m in res.messages]
    contents = [m["content"] for m in res.messages]
    ident = next(i for i, c in enumerate(contents) if c.startswith("## Identity"))
    know = next(i for i, c in enumerate(contents) if c.startswith("## Retrieved knowledge"))
    first_history = roles.index("user")
    assert contents[0] == msgs[0]["content"] and 0 < ident < know < first_history
    assert set(res.report.layers) >= {"identity", "history", "retrieval"}
    with pytest.raises(InvalidInputError, match="layers"):
        ENGINE.optimize(msgs, budget=3000, layers={"gossip": "x"})


def test_restore_after_anthropic_split() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    original = {"role": "user", "id": "r1", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "row " * 600}, {"type": "text", "text": "and?"}]}
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "sql", "input": {}}]},
        original,
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]
    res = engine.optimize(msgs, budget=120)
    removed = [i for i in res.items if i.status != "kept" and i.id.startswith("r1")]
    assert removed and engine.restore(removed[0].id) == original


def test_semantic_layer_uses_the_embedder() -> None:
    import numpy as np

    class Marker:
        """Puts every text that mentions 'zebra' in one direction, the rest in another."""

        def __init__(self) -> None:
            self.calls = 0

        def embed(self, texts):
            self.calls += 1
            return np.array([[1.0, 0.0] if "zebra" in t or "striped" in t else [0.0, 1.0] for t in texts], np.float32)

    msgs = [{"role": "user", "content": f"note {i} about nothing much"} for i in range(20)]
    msgs[5] = {"role": "user", "content": "a zebra crossed the road"}
    dense = Marker()
    res = ContextEngine(encoding="cl100k_base", embedder=dense).optimize(msgs, query="striped animal", budget=1000)
    lexical = ContextEngine(encoding="cl100k_base", embedder=None).optimize(msgs, query="striped animal", budget=1000)
    assert dense.calls == 1
    assert res.items[5].layers["semantic"] == 1.0 and lexical.items[5].layers["semantic"] == 0.0


def test_the_onnx_embedder_plugs_into_the_engine() -> None:
    """Every embedder has one method, `embed`, and the engine calls that."""
    msgs = [{"role": "user", "content": f"note {i} about the weather"} for i in range(6)]
    msgs.append({"role": "user", "content": "what did I say about rain?"})
    res = ContextEngine(encoding="cl100k_base", embedder=ctxfold.Embedder()).optimize(msgs, budget=40)
    assert res.tokens <= 40


def test_an_embedder_without_embed_is_refused_naming_the_fix() -> None:
    class EncodeOnly:
        def encode(self, texts):
            return [[1.0]] * len(texts)

    with pytest.raises(ctxfold.InvalidTypeError, match=r"embedder: EncodeOnly has no embed\(\) method"):
        ContextEngine(encoding="cl100k_base", embedder=EncodeOnly())


def test_semantic_layer_takes_the_stronger_of_lexical_and_dense() -> None:
    """A paraphrase the dense signal finds ranks with the best lexical hit,
    however many messages BM25 matches (max of the standardised scores, not
    their sum)."""
    import numpy as np

    from ctxfold.engine.scoring import semantic_layer

    class Marker:
        def embed(self, texts):
            return np.array([[1.0, 0.0] if "physician" in t or "doctors" in t else [0.0, 1.0] for t in texts], np.float32)

    texts = [f"we visited the park number {i}" for i in range(30)]
    texts[3] = "we visited the museum and many different doctors about cats"  # the lexical best
    texts[7] = "my physician prescribed a nasal spray"  # no query term
    sem = semantic_layer(texts, "how many different doctors did I visit", Marker())
    assert sem[3] == 1.0 and sem[7] >= 0.5 * sem.max()
    assert sem[7] > max(sem[i] for i in range(30) if i not in (3, 7))


def test_intent_layer_favours_the_assistant_for_recall_questions() -> None:
    from ctxfold.engine.messages import parse_messages
    from ctxfold.engine.scoring import intent_layer

    items = parse_messages([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], ENGINE.tokenizer)
    recall = intent_layer(items, "Can you remind me of the name of the restaurant I asked about?")
    about_me = intent_layer(items, "Remind me to call my sister; where did I say she lives?")
    said = intent_layer(items, "In our previous conversation, which apps did I ask about?")
    assert list(recall) == [0.5, 1.0] and list(said) == [0.5, 1.0]
    assert list(about_me) == [1.0, 0.5]


def test_neighbour_expansion_pulls_in_the_question_a_kept_answer_replies_to() -> None:
    from ctxfold.engine.config import DEFAULT_WEIGHTS

    msgs = []
    for i in range(30):
        msgs.append({"role": "user", "content": f"Tell me something about topic {i} please, in detail. " * 3, "id": f"u{i}"})
        answer = "The zebra migration: zebras cross the Mara river. " if i == 5 else f"Filler answer {i} about clouds. "
        msgs.append({"role": "assistant", "content": answer * 6, "id": f"a{i}"})
    msgs.append({"role": "user", "content": "ok thanks", "id": "q"})
    weights = {**DEFAULT_WEIGHTS, "cross_reference": 0.0}  # only the expansion links the pair
    status = {}
    for expand in (False, True):
        engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(expand_neighbours=expand, weights=weights))
        res = engine.optimize(msgs, budget=600, query="zebra migration Mara river")
        assert res.tokens <= 600
        status[expand] = {it.id: it.status for it in res.items}
    assert status[False]["a5"] == status[True]["a5"] == "kept"
    assert status[False]["u5"] == "dropped" and status[True]["u5"] == "kept"


def test_neighbour_expansion_leaves_a_chat_between_two_people_alone() -> None:
    from ctxfold.engine.config import DEFAULT_WEIGHTS

    msgs = []
    for i in range(30):
        msgs.append({"role": "user", "content": f"Ann: I keep thinking about topic {i} these days, honestly. " * 3,
                     "id": f"u{i}"})
        said = "The zebra migration: zebras cross the Mara river. " if i == 5 else f"Filler words {i} about clouds. "
        msgs.append({"role": "assistant", "content": "Bob: " + said * 6, "id": f"a{i}"})
    weights = {**DEFAULT_WEIGHTS, "cross_reference": 0.0}
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(expand_neighbours=True, weights=weights))
    res = engine.optimize(msgs, budget=600, query="zebra migration Mara river")
    status = {it.id: it.status for it in res.items}
    assert res.tokens <= 600 and status["a5"] == "kept"
    # Bob's message is not an answer to Ann's before it: nothing pulls hers in.
    assert status["u5"] == "dropped"


def _tool_pair(call_id: str, output: str, kind: str = "tool_result", path: str = "") -> list[dict]:
    args = '{"path": "%s"}' % path if path else '{"q": "x"}'
    return [
        {"role": "assistant", "content": None, "id": f"call-{call_id}", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read_file" if path else "run", "arguments": args}}]},
        {"role": "tool", "tool_call_id": call_id, "content": output, "kind": kind, "id": f"out-{call_id}"},
    ]


def test_structural_compaction_comes_first_in_its_order_and_is_restorable() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    huge = "\n".join(f"log line {i}: status ok" for i in range(3000))
    msgs = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing build.", "id": "task"},
        *_tool_pair("c1", "/src/app.py\n" + "old version line\n" * 300, kind="file_read", path="/src/app.py"),
        *_tool_pair("c2", huge),
        {"role": "assistant", "content": "We decided to pin numpy below 2.", "kind": "decision", "id": "dec"},
        *_tool_pair("c3", "DEBUG " * 400, kind="debug_log"),
        {"role": "user", "content": "Please rerun the whole test suite and paste the output. " * 5, "id": "dup1"},
        *_tool_pair("c4", "/src/app.py\n" + "new version line\n" * 300, kind="file_read", path="/src/app.py"),
        {"role": "user", "content": "Please rerun the whole test suite and paste the output. " * 5, "id": "dup2"},
        {"role": "assistant", "content": "Looking at it now.", "id": "a-last"},
        {"role": "user", "content": "Is the build green?", "id": "q"},
    ]
    total = engine.count(msgs)
    res = engine.optimize(msgs, budget=total - 15_000)
    by_id = {it.id: it for it in res.items}
    assert res.tokens <= total - 15_000
    # (1) the oversized tool output is cut to head + tail, reversible
    assert by_id["out-c2"].status == "summarized" and "head + tail" in by_id["out-c2"].reason
    assert engine.restore("out-c2")["content"] == huge
    cut = next(m["content"] for m in res.messages if m.get("tool_call_id") == "c2")
    assert "tokens omitted" in cut and cut.startswith("log line 0")
    # nothing else had to change: structural steps stop as soon as it fits
    assert all(by_id[i].status == "kept" for i in ("out-c1", "out-c3", "dup1", "dec"))

    # A tighter budget clears further, in the documented order, never the decision.
    res = engine.optimize(msgs, budget=1200)
    by_id = {it.id: it for it in res.items}
    assert res.tokens <= 1200
    assert by_id["dec"].status == "kept" and by_id["task"].status == "kept"
    # an exact duplicate is left to the planner: never a stub naming a copy that may itself be gone
    assert by_id["dup1"].status in ("kept", "dropped") and not any("duplicate of" in str(m.get("content")) for m in res.messages)
    assert by_id["out-c1"].status == "cleared"  # the superseded read of /src/app.py
    assert engine.restore("out-c1")["content"].startswith("/src/app.py\nold version")
    check_valid(res.messages)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS + ["Berlin's", "offices", "running", ""]), max_size=30).map(" ".join),
                min_size=1, max_size=12),
       st.lists(st.sampled_from(WORDS + ["runs", "office"]), min_size=1, max_size=6).map(" ".join))
def test_cached_bm25_equals_the_core_index(texts, query) -> None:
    import numpy as np

    from ctxfold import Bm25
    from ctxfold.engine.cache import EngineCache
    from ctxfold.engine.scoring import bm25_scores

    cache = EngineCache()
    expected = Bm25(texts).scores(query)
    np.testing.assert_allclose(bm25_scores(cache.terms_of(texts, Bm25.tokenize), query), expected, rtol=1e-12, atol=1e-12)
    # and again from the cache
    np.testing.assert_allclose(bm25_scores(cache.terms_of(texts, Bm25.tokenize), query), expected, rtol=1e-12, atol=1e-12)


def test_a_store_keeps_summaries_and_embeddings_across_engines(tmp_path) -> None:
    from ctxfold import CallableSummarizer, StaticEmbedder
    from ctxfold.memory import SqliteStore

    summaries: list[str] = []
    encoded: list[str] = []

    class CountingEmbedder:
        def __init__(self) -> None:
            self.inner = StaticEmbedder(weighted=False)
            self.model_id = "static-plain-test"

        def embed(self, texts):
            encoded.extend(texts)
            return self.inner.embed(texts)

    def shorten(prompt: str) -> str:
        summaries.append(prompt)
        return "gist"

    msgs = long_history()

    def fresh_engine(store):  # a restarted process: nothing in memory, the same database
        return ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy="windowed"),
                             summarizer=CallableSummarizer(shorten), embedder=CountingEmbedder(), store=store)

    with SqliteStore(tmp_path / "agent.db") as store:
        first = fresh_engine(store).optimize(msgs, budget=2500)
    assert summaries and encoded
    made, embedded = len(summaries), len(encoded)
    with SqliteStore(tmp_path / "agent.db") as store:
        second = fresh_engine(store).optimize(msgs, budget=2500)
    assert len(summaries) == made and len(encoded) == embedded  # nothing recomputed
    assert second.messages == first.messages


STRATEGY_ENGINES = {s: ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy=s))
                    for s in ("windowed", "compacted", "multi_level", "auto")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(40, 3000), st.sampled_from(sorted(STRATEGY_ENGINES)))
def test_every_strategy_always_fits_and_is_valid(msgs, budget, strategy) -> None:
    fitted(STRATEGY_ENGINES[strategy], msgs, budget)


def test_concurrent_aoptimize_on_one_engine() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    msgs = long_history()

    async def many():
        return await asyncio.gather(*(engine.aoptimize(msgs[: 40 + k], budget=900) for k in range(8)))

    results = asyncio.run(many())
    for k, res in enumerate(results):
        alone = ContextEngine(encoding="cl100k_base").optimize(msgs[: 40 + k], budget=900)
        assert res.messages == alone.messages and res.tokens <= 900


def test_a_question_about_the_past_gets_no_recency_pull() -> None:
    from ctxfold.engine.scoring import recency_applies

    assert not recency_applies("What are Kate's hobbies?")
    assert not recency_applies("How many doctors did I visit last year?")
    assert recency_applies("What is my current job?") and recency_applies("How do I fix this error?")
    assert recency_applies("thanks, go on with the next step")
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"note {i} about the garden"} for i in range(12)]
    past = ENGINE.optimize(msgs, query="Which flowers did I plant?", budget=60)
    current = ENGINE.optimize(msgs, query="ok, now the next step", budget=60)
    assert all(it.layers["recency"] == 0.0 for it in past.items)
    assert current.items[-1].layers["recency"] > current.items[0].layers["recency"] > 0.0


def test_entity_layer_weights_an_entity_by_its_rarity() -> None:
    """A speaker's name that starts every message of theirs singles out
    nothing; a place named once does."""
    from ctxfold.engine.scoring import entity_layer

    texts = [f"{'Kate' if i % 2 == 0 else 'Elise'}: message {i} about the weather" for i in range(20)]
    texts[6] = "Kate: we went to Miami for the weekend"
    scores = entity_layer(texts, "When did Kate go to Miami?")
    assert scores[6] == scores.max() and scores[6] > 2 * scores[4]
    assert scores[4] > scores[5] == 0.0
    assert not entity_layer(texts[:1], "Kate").any()  # one message: nothing to tell apart


def test_a_separate_question_about_the_past_does_not_protect_the_latest_turns() -> None:
    """`protect_last` keeps the latest turns for the current task; a separate
    query about the past is answered wherever its evidence is, so the room
    they took goes to the evidence."""
    msgs = [{"role": "user", "content": "My sister Ana moved to Lisbon in March, she loves the tiles there."}]
    for i in range(30):
        msgs.append({"role": "assistant" if i % 2 else "user", "content": f"Talk {i} about cooking pasta and sauces today."})
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(protect_last=4))
    tight = ctxfold.count_messages(msgs[-5:], encoding="cl100k_base") + 4
    past = engine.optimize(msgs, query="Where did Ana move to?", budget=tight)
    assert past.items[0].status == "kept"
    assert any(it.status == "dropped" for it in past.items[-4:-1])
    current = engine.optimize(msgs, budget=tight)  # no separate query: the latest turns are the current task
    assert all(it.status == "kept" for it in current.items[-4:])


REFERRING = ["The payment service keeps timing out.", "Kate Lee opened the ticket.", "Can you restart it?",
             "She said it fails after the deploy.", "That bug is back.", "The deploy script broke the build.",
             "Did they fix it?", "queue depth normal latency fine"]
REFERENCE_ENGINE = ContextEngine(encoding="cl100k_base", config=EngineConfig(annotate_references=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.lists(st.sampled_from(REFERRING), min_size=1,
                                                                          max_size=6).map(" ".join)),
                min_size=1, max_size=30),
       st.integers(40, 1500))
def test_reference_notes_fit_and_keep_the_words(turns, budget) -> None:
    msgs = [{"role": role, "content": text} for role, text in turns]
    res = fitted(REFERENCE_ENGINE, msgs, budget)
    if res is None:
        return
    originals = {m["content"] for m in msgs}
    for m in res.messages:
        text = m["content"]
        if "\n[refs: " in text:
            # The words stay as written; the note only follows them.
            assert text.rsplit("\n[refs: ", 1)[0] in originals and text.endswith("]")
