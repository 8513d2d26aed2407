"""The cache-aware session: a prefix that stays byte for byte while it fits,
compaction that keeps the older segments, the quote of what the question
needs, the report, the Anthropic cache breakpoint and argument checks."""

from __future__ import annotations

import pytest

from ctxfold import CacheAwareSession, CachePricing, ContextEngine, ContextResult, InvalidInputError, InvalidTypeError, to_anthropic

from sdk_checks import assert_anthropic, assert_openai

BUDGET = 1_200


def engine() -> ContextEngine:
    return ContextEngine(encoding="cl100k_base", embedder=None)


def chat(turns: int, start: int = 0) -> list[dict]:
    msgs = []
    for t in range(start, start + turns):
        msgs.append({"role": "user", "content": f"Turn {t}: how is the {t}th build of the pipeline going?", "id": f"u{t}"})
        msgs.append({"role": "assistant", "content": f"Build {t} passed its checks. " * 6, "id": f"a{t}"})
    return msgs


def replay(session: CacheAwareSession, msgs: list[dict], budget: int = BUDGET) -> list:
    """Every call an agent makes over `msgs` (after each user message)."""
    return [session.optimize(msgs[: i + 1], budget=budget) for i, m in enumerate(msgs) if m["role"] == "user"]


def test_pricing_presets_and_checks() -> None:
    assert CachePricing.anthropic() == CachePricing(read=0.1, write=1.25)
    assert CachePricing.openai() == CachePricing(read=0.1, write=1.0)
    assert CachePricing(read=0.5, write=1.0).billed(cached=100, written=10) == pytest.approx(60.0)
    for bad in ({"read": -0.1}, {"write": float("nan")}, {"read": True}):
        with pytest.raises(InvalidInputError, match=next(iter(bad))):
            CachePricing(**bad)


def test_the_engine_makes_sessions_with_the_session_defaults() -> None:
    import inspect

    made = inspect.signature(ContextEngine.session).parameters
    own = inspect.signature(CacheAwareSession.__init__).parameters
    assert {k: p.default for k, p in made.items() if k != "self"} == {
        k: p.default for k, p in own.items() if k not in ("self", "engine")}


def test_session_arguments_are_checked() -> None:
    eng = engine()
    with pytest.raises(InvalidTypeError, match="pricing"):
        eng.session(pricing={"read": 0.1})
    with pytest.raises(InvalidInputError, match="reserve"):
        eng.session(reserve=1.0)
    with pytest.raises(InvalidInputError, match="recall_top"):
        eng.session(recall_top=-1)
    for bad in (0.0, 1.5, True):
        with pytest.raises(InvalidInputError, match="quote_share"):
            eng.session(quote_share=bad)


def test_a_question_that_singles_nothing_out_gets_no_quote_and_a_quote_keeps_to_its_share() -> None:
    session = engine().session(quote_share=0.1)
    results = replay(session, chat(40))
    # Every turn asks the same kind of question about builds: none of the older messages stands out.
    assert all(not any("quoted for the question" in h for h in r.report.highlights) for r in results)
    facts = [{"role": "user", "content": f"Note {k}: the staging database {k} listens on port {5400 + k}.",
              "id": f"fact{k}"} for k in range(6)]
    msgs = [m for k, f in enumerate(facts) for m in (f, {"role": "assistant", "content": "Noted.", "id": f"ack{k}"})]
    session = engine().session(quote_share=0.1)
    replay(session, msgs + chat(40))
    question = {"role": "user", "content": "Which ports do the staging databases listen on?", "id": "q"}
    result = session.optimize([*msgs, *chat(40), question], budget=BUDGET)
    quotes = [m for m in result.messages if str(m.get("content", "")).startswith("Earlier in this conversation")]
    assert result.tokens <= BUDGET and len(quotes) == 1
    assert "[fact" in quotes[0]["content"] and ContextEngine(encoding="cl100k_base").count(quotes) <= 0.1 * BUDGET


def test_the_prefix_stays_while_it_fits_and_the_older_segments_stay_after_a_compaction() -> None:
    session = engine().session(recall_top=0)
    results = replay(session, chat(40))
    assert all(r.tokens <= BUDGET for r in results)
    kept = [r for r in results[1:] if r.report.cache.kept]
    assert len(kept) >= len(results) * 0.6, [r.report.cache.reason for r in results]
    for before, after in zip(results, results[1:]):
        if after.report.cache.kept:
            stable = before.messages[: before.cache_breakpoint + 1]
            assert after.messages[: len(stable)] == stable
            assert after.report.cache.prefix_tokens == before.tokens - 3
    compactions = [r for r in results if not r.report.cache.kept and "exceed" in r.report.cache.reason]
    assert compactions, "the conversation outgrew the budget, so something was compacted"
    # After the first compaction, later ones keep the older segments as they were.
    assert any(r.report.cache.prefix_tokens > 0 for r in compactions[1:])
    assert "prefix" in results[-1].report.to_text()


def test_a_compaction_leaves_the_exchange_before_the_current_turn_verbatim() -> None:
    msgs = []
    for t in range(40):
        msgs.append({"role": "user", "content": f"Turn {t}: what should the {t}th release note say?", "id": f"u{t}"})
        msgs.append({"role": "assistant", "content": f"Release {t}: " + f"the build {t} fixed the cache. " * 24,
                     "id": f"a{t}"})
    results = replay(engine().session(recall_top=0), msgs)
    compacted = [(i, r) for i, r in enumerate(results) if not r.report.cache.kept and r.report.cache.prefix_tokens]
    assert compacted, "the conversation outgrew the budget more than once"
    requoted = 0
    for i, r in compacted:
        # A follow-up reads the last answer and the question it answered as they were: in place, or quoted again.
        sent = "\n".join(m["content"] for m in r.messages)
        assert r.tokens <= BUDGET and msgs[2 * i - 1]["content"] in sent and msgs[2 * i - 2]["content"] in sent
        if r.report.cache.tail:
            requoted += 1
            # Quoted after the cache breakpoint, for this turn only: the next turn keeps the prefix without it.
            assert r.cache_breakpoint == len(r.messages) - 3
            if i + 1 < len(results) and results[i + 1].report.cache.kept:
                stable = r.messages[: r.cache_breakpoint + 1]
                assert results[i + 1].messages[: len(stable)] == stable
                assert not results[i + 1].report.cache.tail
    assert requoted, "the new segments shortened the exchange at least once"


def test_the_exchange_quoted_after_a_compaction_leaves_out_the_tool_rounds_the_answer_reports() -> None:
    msgs = []
    for t in range(30):
        msgs += [
            {"role": "user", "content": f"Turn {t}: which region had the most failed builds in week {t}?", "id": f"u{t}"},
            {"role": "assistant", "content": None, "id": f"call{t}", "tool_calls": [
                {"id": f"c{t}", "type": "function", "function": {"name": "build_log", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": f"week {t} region log line. " * 40, "id": f"log{t}"},
            {"role": "assistant", "content": f"Week {t}: region {t % 4} had the most failed builds. "
             + f"Its build {t} failed the cache checks. " * 12, "id": f"a{t}"},
        ]
    results = replay(engine().session(recall_top=0), msgs)
    requoted = [(i, r) for i, r in enumerate(results) if r.report.cache.tail]
    assert requoted, "a compaction shortened the last exchange at least once"
    for i, r in requoted:
        tail = r.messages[r.cache_breakpoint + 1]["content"]
        # The answer and the question it answers, as they were; not the log the answer reports.
        assert msgs[4 * i - 1]["content"] in tail and f"[log{i - 1}, " not in tail
        assert r.report.cache.tail == [f"u{i - 1}", f"a{i - 1}"] or r.report.cache.tail == [f"a{i - 1}"]
        assert r.tokens <= BUDGET
        assert_openai(r.messages)


def asked_about_a_fact_compacted_away() -> tuple[list[dict], CacheAwareSession, dict, ContextResult]:
    """A fact stated early in a long chat, then a question about it: the messages, the session, the question
    and the session's result for it."""
    msgs = [{"role": "user", "content": "Note for later: the staging database listens on port 5433.", "id": "fact"},
            {"role": "assistant", "content": "Noted.", "id": "ack"}] + chat(40)
    session = engine().session()
    replay(session, msgs)
    question = {"role": "user", "content": "Which port does the staging database listen on?", "id": "q"}
    return msgs, session, question, session.optimize([*msgs, question], budget=BUDGET)


def test_a_question_about_the_past_compacts_when_the_prefix_leaves_its_tail_too_little_room() -> None:
    _, _, _, result = asked_about_a_fact_compacted_away()
    cache = result.report.cache
    # The prefix and the question fit, but leave the tail less than half the quote room: the session compacted first.
    assert not cache.kept and cache.reason == "the messages the question needs do not fit beside the prefix"
    assert any("Note for later: the staging database" in m["content"] for m in result.messages[:-1])
    assert result.tokens <= BUDGET


def test_a_question_about_something_compacted_away_gets_it_quoted_before_the_current_turn() -> None:
    msgs, session, question, result = asked_about_a_fact_compacted_away()
    assert result.tokens <= BUDGET
    status = {r.id: r for r in result.items}
    fact = msgs[0]["content"]
    if status["fact"].status == "kept":
        pytest.skip("the compaction kept the fact; nothing to quote")
    at = next(i for i, m in enumerate(result.messages[:-1]) if fact in m["content"])
    quote = result.messages[at]
    assert quote["role"] == "user" and "[fact, user]" in quote["content"]
    assert result.messages[-1]["content"] == question["content"]
    cache = result.report.cache
    # A recall tail, when there is one, is outside the prefix: the breakpoint is just before it.
    assert result.cache_breakpoint == len(result.messages) - (3 if cache.tail else 1)
    if "fact" in cache.tail:
        # The fact is in the tail, and the tail's tokens are counted.
        assert at == len(result.messages) - 2
        assert quote["content"].startswith("Earlier in this conversation (recalled")
        assert cache.tail_tokens == ContextEngine(encoding="cl100k_base").count([quote]) - 3
        assert "recalled in the tail" in status["fact"].reason
        assert any(h.startswith("recall tail") and "fact" in h for h in result.report.highlights)
    else:
        assert at <= result.cache_breakpoint  # the quote is part of the prefix the next call keeps
        assert "quoted again" in status["fact"].reason
        assert any("quoted for the question: fact" in h for h in result.report.highlights)
    assert_openai(result.messages)
    system, turns = to_anthropic(result.messages, cache_breakpoint=result.cache_breakpoint)
    assert_anthropic(system, turns)
    marked = [b for t in turns for b in t["content"] if "cache_control" in b]
    assert len(marked) == 1 and marked[0]["cache_control"] == {"type": "ephemeral"}
    # The next turn keeps what the breakpoint marked, and holds the fact at most once.
    answer = {"role": "assistant", "content": "Port 5433.", "id": "answer"}
    again = {"role": "user", "content": "And which port does the staging database listen on now?", "id": "q2"}
    following = session.optimize([*msgs, question, answer, again], budget=BUDGET)
    assert following.tokens <= BUDGET
    if following.report.cache.kept:
        stable = result.messages[: result.cache_breakpoint + 1]
        assert following.messages[: len(stable)] == stable
    assert sum(fact in m["content"] for m in following.messages) <= 1


def test_the_recall_tail_is_sent_for_its_turn_only_and_the_reserve_stays_free() -> None:
    # Many facts the question singles out, more than fit within the compaction target beside the prefix.
    facts = [{"role": "user", "content": f"Note {k}: the staging database {k} listens on port {5400 + k}.",
              "id": f"fact{k}"} for k in range(12)]
    msgs = [m for k, f in enumerate(facts) for m in (f, {"role": "assistant", "content": "Noted.", "id": f"ack{k}"})]
    msgs += chat(40)
    session = engine().session(quote_share=0.5)
    replay(session, msgs)
    question = {"role": "user", "content": "Which ports do the staging databases listen on?", "id": "q"}
    result = session.optimize([*msgs, question], budget=BUDGET)
    cache = result.report.cache
    assert result.tokens <= BUDGET and cache.tail, result.report.highlights
    bp = result.cache_breakpoint
    tail = result.messages[bp + 1]
    assert tail["role"] == "user" and result.messages[bp + 2:] == [{"role": "user", "content": question["content"]}]
    for i in cache.tail:
        original = next(m["content"] for m in msgs if m["id"] == i)
        assert f"[{i}, " in tail["content"] and original in tail["content"]
    # What the breakpoint marks stays within the compaction target: the tail used the reserve for this turn only.
    counter = ContextEngine(encoding="cl100k_base")
    assert counter.count(result.messages[: bp + 1]) <= BUDGET - session.reserve * BUDGET
    assert result.tokens == counter.count(result.messages)
    # A later call of the same turn (a tool round) sends the same tail; the next turn drops it.
    call = {"role": "assistant", "content": None, "id": "call", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}
    done = {"role": "tool", "tool_call_id": "c1", "content": "ok", "id": "done"}
    same_turn = session.optimize([*msgs, question, call, done], budget=BUDGET)
    if same_turn.report.cache.kept:
        assert same_turn.messages[: bp + 1] == result.messages[: bp + 1]
        assert set(same_turn.report.cache.tail) <= set(cache.tail)
        if same_turn.report.cache.tail == cache.tail:
            assert same_turn.messages[bp + 1] == tail
    answer = {"role": "assistant", "content": "Ports 5400 to 5411.", "id": "answer"}
    later = {"role": "user", "content": "Thanks. How is the next build going?", "id": "q2"}
    following = session.optimize([*msgs, question, call, done, answer, later], budget=BUDGET)
    assert following.tokens <= BUDGET
    if following.report.cache.kept:
        assert following.messages[: bp + 1] == result.messages[: bp + 1]
        assert tail not in following.messages
    assert_openai(following.messages)


def test_a_question_that_recalls_the_conversation_is_planned_alone_and_the_prefix_waits() -> None:
    facts = [{"role": "user", "content": f"Note {k}: the staging database {k} listens on port {5400 + k}.",
              "id": f"fact{k}"} for k in range(6)]
    msgs = [m for k, f in enumerate(facts) for m in (f, {"role": "assistant", "content": "Noted.", "id": f"ack{k}"})]
    msgs += chat(41)
    eng = engine()
    session = eng.session()
    before = replay(session, msgs)[-1]
    assert not before.report.cache.kept, "the replay ends on a compaction, so the turns after the question fit"
    question = {"role": "user", "content": "Which ports did I give for the staging databases?", "id": "q"}
    result = session.optimize([*msgs, question], budget=BUDGET)
    cache = result.report.cache
    assert cache.one_off and not cache.kept and "recalls" in cache.reason and result.cache_breakpoint is None
    # The engine's own plan for the question, every message of it priced and within the budget.
    planned = eng.optimize([*msgs, question], budget=BUDGET)
    assert result.messages == planned.messages and result.tokens == planned.tokens <= BUDGET
    assert sum(f["content"] in m["content"] for f in facts for m in result.messages) >= 3
    assert_openai(result.messages)
    # The turn after it reads the prefix from before the question, as the provider still caches it.
    answer = {"role": "assistant", "content": "Ports 5400 to 5405.", "id": "answer"}
    later = {"role": "user", "content": "Thanks. How is the next build going?", "id": "q2"}
    following = session.optimize([*msgs, question, answer, later], budget=BUDGET)
    assert following.tokens <= BUDGET and not following.report.cache.one_off and following.report.cache.kept
    stable = before.messages[: before.cache_breakpoint + 1]
    assert following.messages[: len(stable)] == stable


def test_a_changed_history_or_budget_starts_afresh() -> None:
    session = engine().session()
    msgs = chat(10)
    session.optimize(msgs, budget=BUDGET)
    assert session.optimize(msgs + chat(1, 10), budget=BUDGET).report.cache.kept
    edited = [dict(m) for m in msgs]
    edited[2]["content"] = "Turn 1, rewritten"
    assert session.optimize(edited, budget=BUDGET).report.cache.reason == "the earlier messages changed"
    assert session.optimize(edited, budget=BUDGET + 1).report.cache.reason == "the budget or the system prompt changed"
    session.reset()
    assert session.optimize(edited, budget=BUDGET).report.cache.reason == "no prefix yet"


def test_to_anthropic_cache_breakpoint_is_checked_and_marks_tool_results() -> None:
    msgs = [
        {"role": "user", "content": "Look it up"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found it"},
        {"role": "user", "content": "thanks"},
    ]
    _, turns = to_anthropic(msgs, cache_breakpoint=2)
    assert turns[2]["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "content": "found it",
                                      "cache_control": {"type": "ephemeral"}}
    assert "cache_control" not in turns[2]["content"][1]
    for bad in (4, -1, True, "1"):
        with pytest.raises(InvalidInputError, match="cache_breakpoint"):
            to_anthropic(msgs, cache_breakpoint=bad)
