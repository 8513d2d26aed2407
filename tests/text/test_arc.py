"""The conversation arc: what it finds in a scripted conversation (open
questions, decisions, pending and completed actions, topics, focus), the
rules one case at a time, the engine's report carrying it, and the opt-in
layer fitting the budget with the engine's promises intact."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold import BudgetError, ContextEngine, EngineConfig, InvalidInputError, InvalidTypeError, count_messages
from ctxfold.text.arc import ConversationArc, build_arc

from agent_checks import current_turn
from test_agent_loop import agent_conversations, check_tool_pairing

SCRIPT = [
    {"role": "user", "content": "We need a database for the ledger service. Postgres or MySQL?"},                 # 0
    {"role": "assistant", "content": "Postgres has transactional DDL and JSONB; I'd pick Postgres."},            # 1
    {"role": "user", "content": "OK, let's go with Postgres. What about the retention policy for audit logs?"},  # 2
    {"role": "assistant", "content": "I will draft the migration script for the ledger tables."},               # 3
    {"role": "user", "content": "Also, who owns the on-call rotation?"},                                         # 4
    {"role": "assistant", "content": "I don't have that information; can you check with your team lead?"},      # 5
    {"role": "user", "content": "TODO: update the README with the new setup steps."},                            # 6
    {"role": "assistant", "content": "I drafted the migration script and pushed it to the branch."},             # 7
    {"role": "user", "content": "I'll book the load test environment for Thursday."},                            # 8
    {"role": "assistant", "content": "Remember to check the connection pool size before the test."},             # 9
    {"role": "user", "content": "Next, the frontend: should we use React or Svelte for the dashboard?"},          # 10
    {"role": "assistant", "content": "React has the larger ecosystem for dashboard widgets; Svelte is smaller."},  # 11
    {"role": "user", "content": "Agreed, we'll use React with Vite for the dashboard."},                         # 12
    {"role": "assistant", "content": "The Vite config for React needs the dashboard proxy set."},               # 13
    {"role": "user", "content": "Done. How do I configure the Vite proxy for the dashboard API?"},              # 14
]

ARC_HEADING = "## Conversation so far\n"

# (kind, message index, words the entry's text contains)
EXPECTED = [
    ("open question", 2, "retention policy"),
    ("open question", 4, "on-call rotation"),
    ("decision", 2, "let's go with Postgres"),
    ("decision", 12, "React with Vite"),
    ("pending", 6, "update the README"),
    ("completed", 3, "draft the migration script"),  # completed by message 7
    ("completed", 8, "book the load test"),          # the bare "Done." of message 14: the latest pending action
]


def _entries(arc: ConversationArc) -> list[tuple[str, int, str]]:
    return (
        [("open question", q.index, q.text) for q in arc.open_questions]
        + [("decision", d.index, d.text) for d in arc.decisions]
        + [(a.status, a.index, a.text) for a in arc.actions]
    )


@pytest.fixture(scope="module")
def arc() -> ConversationArc:
    return build_arc(SCRIPT, n_topics=2)


@pytest.mark.parametrize(("kind", "index", "words"), EXPECTED)
def test_the_scripted_conversation_yields_each_entry(arc, kind, index, words) -> None:
    assert any(k == kind and i == index and words in text for k, i, text in _entries(arc)), _entries(arc)


def test_the_scripted_conversation_yields_nothing_else(arc) -> None:
    found = [(k, i) for k, i, _ in _entries(arc)]
    assert sorted(found) == sorted((k, i) for k, i, _ in EXPECTED)


def test_completion_points_at_the_message_that_reported_it(arc) -> None:
    done = {a.index: a.done_index for a in arc.completed}
    assert done == {3: 7, 8: 14}


def test_topics_split_the_backend_from_the_frontend(arc) -> None:
    assert [(t.start, t.end) for t in arc.topics] == [(0, 10), (10, 15)]
    assert "postgres" in arc.topics[0].terms
    assert {"dashboard", "vite", "react"} <= set(arc.topics[1].terms)
    assert arc.focus is not None and arc.focus.topic == 1
    assert {"vite", "react"} <= set(arc.focus.entities)


def test_text_puts_the_focus_first_and_names_each_section(arc) -> None:
    lines = arc.to_text().splitlines()
    assert lines[0].startswith("Current focus (messages 10-14)")
    for title in ("Open questions:", "Pending actions:", "Decisions:", "Completed:", "Earlier topics, newest last:"):
        assert title in lines
    assert arc.to_dict()["decisions"][0]["text"] == "OK, let's go with Postgres."


# One rule at a time: (messages as (role, text), expected open question indices).
OPEN_QUESTION_CASES = [
    ([("user", "Where is the invoice?"), ("assistant", "The invoice is in the shared drive."), ("user", "Thanks")], []),
    ([("user", "Where is the invoice?"), ("assistant", "Let me look."), ("user", "Thanks")], [0]),
    # addressed later, not by the first reply: half of its terms come back
    ([("user", "Where is the invoice?"), ("assistant", "Let me look."), ("user", "ok"),
      ("assistant", "Found the invoice: it was in the finance folder."), ("user", "great")], []),
    # the user's own later message does not answer the user's question
    ([("user", "Where is the invoice?"), ("user", "The invoice matters."), ("user", "hello?")], [0]),
    # the current turn (last user message) is not history
    ([("user", "Hi"), ("assistant", "Hello"), ("user", "What is the deadline for the grant?")], []),
    # a question with no content words is addressed by any reply
    ([("user", "How are you?"), ("assistant", "Fine."), ("user", "ok")], []),
    # a question word opening a sentence without "?"
    ([("user", "What time does the train to Porto leave"), ("assistant", "Nice weather."), ("user", "ok")], [0]),
    # a statement is not a question
    ([("user", "What I need is a quiet room."), ("assistant", "Noted."), ("user", "ok")], []),
    # two speakers with the same role, told apart by name
    ([("user", "Did you see the Lisbon photos?", "Ana"), ("user", "Yes, the Lisbon photos are lovely!", "Ben"),
      ("user", "ok", "Ana")], []),
]


@pytest.mark.parametrize(("turns", "expected"), OPEN_QUESTION_CASES)
def test_open_question_rule(turns, expected) -> None:
    msgs = [{"role": t[0], "content": t[1], **({"name": t[2]} if len(t) > 2 else {})} for t in turns]
    assert [q.index for q in build_arc(msgs, embedder=None).open_questions] == expected


# (role, text, expected kinds found)
CUE_CASES = [
    ("user", "We decided to ship on Monday.", ["decision"]),
    ("assistant", "I'll use SQLite for the cache.", ["decision"]),
    ("user", "Let's go with the blue theme.", ["decision"]),
    ("user", "I picked up the kids at five.", []),
    ("user", "I will call the landlord tomorrow.", ["pending"]),
    ("assistant", "I'm going to rewrite the parser.", ["pending"]),
    ("user", "I'm going to the mountains next week.", []),
    ("user", "Action item: renew the TLS certificate.", ["pending"]),
    ("user", "Remind me to water the plants.", ["pending"]),
    ("assistant", "Remember to water the plants weekly.", []),  # advice, not a commitment
    ("user", "Fixed the flaky login test.", ["completed"]),
    ("user", "The migration is done.", ["completed"]),
    ("user", "I pruned the roses yesterday.", []),  # a past tense alone is no finished task
    ("user", "I needed a break.", []),
    ("user", "Should we use Redis?", []),  # a question decides nothing
    # an assistant's tutorial voice is neither a choice nor a promise
    ("assistant", "Let's use the complement rule to find the probability.", []),
    ("assistant", "We'll add a route for the login form.", []),
    ("user", "We'll add a route for the login form.", ["pending"]),
    ("assistant", "I'll explain how the cache works.", []),  # done as it is said
    ("assistant", "Next steps: keep practising every day.", []),
    ("user", "Next steps: book the venue.", ["pending"]),
    ("assistant", "- **Done**: tasks that are fully completed.", []),  # a label, not a report
    ("user", "I'm not sure if I need to restart the server.", []),
    ("assistant", "Once the issues are resolved, the commit goes through.", []),  # a condition
]


@pytest.mark.parametrize(("role", "text", "kinds"), CUE_CASES)
def test_decision_and_action_cues(role, text, kinds) -> None:
    arc = build_arc([{"role": role, "content": text}, {"role": "user", "content": "ok"}], embedder=None)
    found = ["decision"] * len(arc.decisions) + [a.status for a in arc.actions]
    assert found == kinds


def test_completion_matches_the_commitment_it_names() -> None:
    msgs = [
        {"role": "user", "content": "I will renew the passport."},
        {"role": "user", "content": "I will fix the garage door."},
        {"role": "user", "content": "I renewed the passport today."},
    ]
    arc = build_arc(msgs, embedder=None)
    assert [(a.index, a.status, a.done_index) for a in arc.actions] == [(0, "completed", 2), (1, "pending", None)]


def test_build_arc_rejects_bad_input() -> None:
    with pytest.raises(InvalidTypeError, match="messages"):
        build_arc("hello")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"messages\[1\]"):
        build_arc([{"role": "user", "content": "a"}, "b"])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="n_topics"):
        build_arc([{"role": "user", "content": "a"}], n_topics=0)


def test_the_engines_report_carries_the_arc() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    res = engine.optimize(SCRIPT, budget=120)
    arc = res.report.arc
    assert arc is not None and arc.message_count == len(SCRIPT)
    assert [q.index for q in arc.open_questions] == [2, 4]
    assert res.report.to_dict()["arc"]["decisions"][1]["text"].startswith("Agreed, we'll use React")
    assert "conversation arc:" in res.report.to_text()
    assert not any(str(m["content"]).startswith(ARC_HEADING) for m in res.messages)  # off by default: not in the prompt


def test_the_session_report_carries_the_arc() -> None:
    session = ContextEngine(encoding="cl100k_base").session()
    res = session.optimize(SCRIPT, budget=2000)
    assert res.report.arc is not None and [d.index for d in res.report.arc.decisions] == [2, 12]


def test_the_arc_indices_count_system_messages() -> None:
    res = ContextEngine(encoding="cl100k_base").optimize(SCRIPT, system="You are terse.", budget=2000)
    assert [d.index for d in res.report.arc.decisions] == [3, 13]


@pytest.mark.parametrize("budget", [40, 80, 150, 400, 1000, 4000])
def test_the_arc_layer_fits_the_budget_in_whole_lines(budget) -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(conversation_arc=True))
    res = engine.optimize(SCRIPT, budget=budget)
    assert res.tokens <= budget and res.tokens == count_messages(res.messages, encoding="cl100k_base")
    layer = [m["content"] for m in res.messages if str(m["content"]).startswith(ARC_HEADING)]
    full = res.report.arc.to_text()
    for text in layer:
        body = text.split("\n", 1)[1]
        assert full.startswith(body) and (body == full or full[len(body)] == "\n")
    assert res.messages[-1]["content"] == SCRIPT[-1]["content"]
    if budget in (150, 400):  # room for part of it: whole lines, the focus first
        assert layer and layer[0].split("\n", 1)[1] != full and "Current focus" in layer[0]
    if budget >= 1000:
        assert layer and layer[0].split("\n", 1)[1] == full


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(agent_conversations(), st.integers(4, 8_000))
def test_with_the_arc_layer_the_promises_hold(msgs, budget) -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(conversation_arc=True))
    plain = ContextEngine(encoding="cl100k_base")
    try:
        res = engine.optimize(msgs, budget=budget)
    except BudgetError:
        # The arc yields to what must stay: it never causes a BudgetError the engine without it avoids.
        with pytest.raises(BudgetError):
            plain.optimize(msgs, budget=budget)
        return
    assert res.tokens <= budget and res.tokens == count_messages(res.messages, encoding="cl100k_base")
    check_tool_pairing(res.messages)
    contents = [m.get("content") for m in res.messages]
    for i in current_turn(msgs):
        m = msgs[i]
        if m["role"] == "user":  # verbatim, or cut to head + tail with its marker
            assert m["content"] in contents or any(isinstance(c, str) and "tokens omitted" in c for c in contents)
    for m in msgs:
        if m.get("pinned"):
            assert m["content"] in contents
