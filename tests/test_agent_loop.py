"""The engine's promises inside an agent loop, for every strategy: the current
turn is never lost (verbatim, or cut to head + tail with its marker), tool
calls and results stay together, pinned messages stay, the output fits and
its count is exact, it validates against the OpenAI SDK's message types (and
Anthropic's after `to_anthropic`), and a budget too small raises
`BudgetError`, never a silent loss."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold import BudgetError, ContextEngine, EngineConfig, count_messages, to_anthropic
from ctxfold.engine.config import STRATEGIES
from ctxfold.engine.excerpts import EXCERPT_GAP, EXCERPT_MARKER

from agent_checks import current_turn, must_be_present
from sdk_checks import assert_anthropic, assert_openai

# "done." ends sentences, so that long messages can be shortened to an excerpt of some of them.
WORDS = "deploy berlin invoice error python flight budget laptop friday meeting 42 2023 status ok done.".split()
# A few hundred examples in the test run; `--hypothesis-profile=fuzz` raises it to thousands.
EXAMPLES = max(settings().max_examples, 150)
EXCERPTS: list[int] = []
ENGINES = {s: ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy=s)) for s in STRATEGIES}


def _text(draw, max_words: int = 60) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=max_words)))


@st.composite
def agent_conversations(draw):
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": "You are a careful agent. " + _text(draw, 30)})
    call = 0

    def tool_round() -> None:
        nonlocal call
        calls = []
        for _ in range(draw(st.integers(1, 3))):
            call += 1
            calls.append({"id": f"call_{call}", "type": "function",
                          "function": {"name": draw(st.sampled_from(["search", "read_file", "run"])),
                                       "arguments": json.dumps({"q": _text(draw, 5)})}})
        msgs.append({"role": "assistant", "content": draw(st.sampled_from([None, "Let me check."])), "tool_calls": calls})
        for c in calls:
            result = {"role": "tool", "tool_call_id": c["id"], "content": _text(draw) * draw(st.sampled_from([1, 3, 40, 400]))}
            kind = draw(st.sampled_from([None, None, "decision", "active_task", "file_read", "debug_log"]))
            if kind:
                result["kind"] = kind
            msgs.append(result)

    for _ in range(draw(st.integers(0, 14))):
        msgs.append({"role": "user", "content": _text(draw) * draw(st.sampled_from([1, 1, 2, 30]))})
        for _ in range(draw(st.integers(0, 2))):
            tool_round()
        msgs.append({"role": "assistant", "content": _text(draw) * draw(st.sampled_from([1, 4]))})
    ending = draw(st.sampled_from(["user", "long user", "tool", "assistant"]))
    if ending in ("user", "long user"):
        msgs.append({"role": "user", "content": _text(draw) * (draw(st.integers(50, 400)) if ending == "long user" else 1)})
    elif ending == "tool":
        msgs.append({"role": "user", "content": _text(draw)})
        tool_round()
    for m in msgs:
        if m["role"] != "system" and draw(st.integers(0, 15)) == 0:
            m["pinned"] = True
    return msgs


def check_tool_pairing(out: list[dict]) -> None:
    """OpenAI's rule: an assistant message with tool calls is followed by one result per call, and
    every result answers a call of the assistant message right before its run of results."""
    i = 0
    while i < len(out):
        m = out[i]
        assert m["role"] != "tool", f"tool result without its call at output position {i}"
        if m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            answered = []
            j = i + 1
            while j < len(out) and out[j]["role"] == "tool":
                answered.append(out[j]["tool_call_id"])
                j += 1
            assert sorted(answered) == sorted(ids), f"call at {i} answered by {answered}, expected {ids}"
            i = j
        else:
            i += 1


def check_promises(msgs: list[dict], budget: int, strategy: str) -> None:
    engine = ENGINES[strategy]
    try:
        res = engine.optimize(msgs, budget=budget)
    except BudgetError:
        check_budget_error(msgs, budget)
        return
    check_output(msgs, res, budget)


def check_budget_error(msgs: list[dict], budget: int) -> None:
    needed = count_messages(must_be_present(msgs), encoding="cl100k_base")
    assert needed > budget, f"BudgetError though everything that must stay fits verbatim ({needed} <= {budget})"


def check_output(msgs: list[dict], res, budget: int) -> None:
    """Every promise of one result for the input `msgs`."""
    assert [r.index for r in res.items] == list(range(len(msgs)))
    assert res.tokens <= budget
    assert res.tokens == count_messages(res.messages, encoding="cl100k_base")
    check_tool_pairing(res.messages)
    by_index = {r.index: r for r in res.items}
    contents = [m.get("content") for m in res.messages]
    for i in current_turn(msgs):
        r = by_index[i]
        original = msgs[i].get("content")
        if r.status == "kept":
            assert original in contents or msgs[i].get("tool_calls")
        else:
            assert r.status == "summarized" and r.reason.startswith(("current turn cut", "tool output cut")), (r.status, r.reason)
            assert any(isinstance(c, str) and "tokens omitted" in c and original.startswith(c.split("\n[...")[0])
                       for c in contents)
    for i, m in enumerate(msgs):
        if m.get("pinned"):
            assert by_index[i].status == "kept" and m["content"] in contents
    if msgs and msgs[-1]["role"] in ("user", "tool"):
        assert res.messages[-1]["role"] == msgs[-1]["role"]
    for r in res.items:
        if r.status != "kept":
            assert r.reason, f"{r.id} is {r.status} without a reason"
    assert_openai(res.messages)
    speaks = any(m["role"] not in ("system", "developer") and (str(m.get("content") or "").strip() or m.get("tool_calls"))
                 for m in res.messages)
    assert_anthropic(*to_anthropic(res.messages), allow_empty=not speaks)
    excerpts = [c.removeprefix(EXCERPT_MARKER) for c in contents if isinstance(c, str) and c.startswith(EXCERPT_MARKER)]
    shortened = [r.index for r in res.items if r.reason.startswith("shortened to an excerpt")]
    assert len(excerpts) == len(shortened)
    for i, quoted in zip(shortened, excerpts):
        # An excerpt quotes its own message's sentences, in order.
        assert all(part in msgs[i]["content"] for part in quoted.split(EXCERPT_GAP))
    EXCERPTS.extend(shortened)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(agent_conversations(), st.sampled_from(STRATEGIES), st.integers(4, 30_000))
def test_agent_loop_promises_hold_for_every_strategy(msgs, strategy, budget) -> None:
    check_promises(msgs, budget, strategy)


def turn_ends(msgs: list[dict]) -> list[int]:
    """Where an agent calls the model: after each user message and each tool round."""
    return [i + 1 for i, m in enumerate(msgs)
            if m["role"] == "user" or (m["role"] == "tool" and (i + 1 == len(msgs) or msgs[i + 1]["role"] != "tool"))]


SESSION_ENGINE = ContextEngine(encoding="cl100k_base")


def replay_session(session, msgs: list[dict], budget: int) -> tuple[int, int]:
    """Every call an agent makes over `msgs`, each output checked; how many had
    a recall tail and how many were one-offs (a question that recalls the
    conversation, planned alone), which leave the prefix for the next call."""
    previous: list[dict] | None = None
    tails = one_offs = 0
    for end in [*turn_ends(msgs), len(msgs)]:
        history = msgs[:end]
        try:
            res = session.optimize(history, budget=budget)
        except BudgetError:
            check_budget_error(history, budget)
            previous = None
            continue
        check_output(history, res, budget)
        cache = res.report.cache
        if cache.one_off:
            assert res.cache_breakpoint is None and not cache.kept and not cache.tail and cache.tail_tokens == 0
            one_offs += 1
            continue
        if res.messages:
            assert res.cache_breakpoint is not None and 0 <= res.cache_breakpoint < len(res.messages)
        if cache.tail:
            # The recall tail: right after the breakpoint, just before the current turn, quoting earlier messages.
            tails += 1
            bp = res.cache_breakpoint
            tail = res.messages[bp + 1]
            user = max(i for i, m in enumerate(history) if m["role"] == "user")
            assert tail["role"] == "user" and tail["content"].startswith("Earlier in this conversation")
            assert res.messages[bp + 2]["content"] == history[user]["content"]
            assert cache.tail_tokens == count_messages([tail], encoding="cl100k_base") - 3
            ids = {str(r.id): r.index for r in res.items}
            for i in cache.tail:
                assert ids[i] < user and f"[{i}, " in tail["content"]
                assert str(history[ids[i]].get("content") or "") in tail["content"]
        else:
            assert cache.tail_tokens == 0
        if cache.kept and previous is not None:
            # What the last call marked as stable is where this one starts.
            assert res.messages[: len(previous)] == previous, cache
        previous = res.messages[: (res.cache_breakpoint or 0) + 1]
    return tails, one_offs


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(agent_conversations(), st.integers(4, 6_000), st.floats(0.0, 0.9), st.integers(0, 8))
def test_cache_aware_session_promises_hold_turn_after_turn(msgs, budget, reserve, recall_top) -> None:
    replay_session(SESSION_ENGINE.session(reserve=reserve, recall_top=recall_top), msgs, budget)


@st.composite
def conversations_asking_about_the_past(draw, question: str = "Which ports does the {} server listen on?"):
    """Facts stated early, an agent conversation after them, and a question about some of the facts
    (sometimes answered by a tool round): what the recall tail is for."""
    facts = draw(st.integers(6, 24))
    msgs: list[dict] = []
    for k in range(facts):
        name = draw(st.sampled_from(["staging", "billing", "search", "backup"]))
        msgs.append({"role": "user", "content": f"Note {k}: the {name} server {k} listens on port {5400 + k}. " + _text(draw, 20)})
        msgs.append({"role": "assistant", "content": "Noted."})
    msgs += draw(agent_conversations())
    asked = draw(st.sampled_from(["staging", "billing", "search", "backup"]))
    msgs.append({"role": "user", "content": question.format(asked)})
    if draw(st.booleans()):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_q", "type": "function", "function": {"name": "search", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": "call_q", "content": _text(draw)})
    return msgs


TAILS: list[int] = []


# Derandomized: the check below counts how many examples got a tail, which must not vary from run to run.
@settings(max_examples=EXAMPLES // 2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations_asking_about_the_past(), st.integers(600, 4_000), st.floats(0.0, 0.9), st.floats(0.15, 1.0))
def test_the_recall_tail_keeps_the_promises(msgs, budget, reserve, quote_share) -> None:
    session = SESSION_ENGINE.session(reserve=reserve, quote_share=quote_share)
    TAILS.append(replay_session(session, msgs, budget)[0])


def test_the_recall_tail_was_exercised() -> None:
    # The property above means something only if some of its conversations got a tail.
    if not TAILS:
        pytest.skip("run with the property test above")
    assert sum(t > 0 for t in TAILS) >= len(TAILS) // 10, TAILS


ONE_OFFS: list[int] = []


@settings(max_examples=EXAMPLES // 4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations_asking_about_the_past("Which ports did I give for the {} server?"), st.integers(200, 4_000),
       st.floats(0.0, 0.9))
def test_a_question_that_recalls_the_conversation_keeps_the_promises(msgs, budget, reserve) -> None:
    ONE_OFFS.append(replay_session(SESSION_ENGINE.session(reserve=reserve), msgs, budget)[1])


def test_the_one_off_was_exercised() -> None:
    if not ONE_OFFS:
        pytest.skip("run with the property test above")
    # Once something was compacted, the question is planned alone.
    assert sum(n > 0 for n in ONE_OFFS) >= len(ONE_OFFS) // 2, ONE_OFFS


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(agent_conversations(), st.sampled_from(STRATEGIES), st.integers(4, 1_500))
def test_agent_loop_promises_hold_at_small_budgets(msgs, strategy, budget) -> None:
    check_promises(msgs, budget, strategy)


RULE = "Always quote the exact error message when I ask about failures."


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(agent_conversations(), st.sampled_from(["optimal", "full"]), st.data())
def test_a_standing_instruction_stays_while_what_must_stay_fits_beside_it(msgs, strategy, data) -> None:
    # The strategies that plan every message freely; the others also keep a
    # window of recent messages (and compacted its gap markers), which then
    # compete with it for the same room.
    starts = [i for i, m in enumerate(msgs) if m["role"] == "user"] + [len(msgs)]
    at = data.draw(st.sampled_from(starts))
    msgs = [*msgs[:at], {"role": "user", "content": RULE}, *msgs[at:]]
    # What the plan keeps present besides it: the last messages, the last user
    # message, the agent-state kinds (all with their tool groups).
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    soft = set(range(max(0, len(msgs) - EngineConfig().protect_last), len(msgs))) | {last_user, at}
    soft |= {i for i, m in enumerate(msgs) if m.get("kind") in ("decision", "active_task")}
    needed = count_messages(must_be_present(msgs, frozenset(soft)), encoding="cl100k_base")
    budget = data.draw(st.integers(needed, needed + 2_000))
    res = ENGINES[strategy].optimize(msgs, budget=budget)
    check_output(msgs, res, budget)
    assert RULE in [m.get("content") for m in res.messages]


# --- the reported cases -----------------------------------------------------------------


def _history(rounds: int, start: int = 0) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You are a support agent."}]
    for r in range(start, start + rounds):
        msgs.append({"role": "user", "content": f"Question {r} about invoice {1000 + r} and the berlin office."})
        msgs.append({"role": "assistant", "content": f"Answer {r}: invoice {1000 + r} is paid; " + "details " * 40})
    return msgs


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_long_current_question_is_cut_not_dropped(strategy) -> None:
    log = "\n".join(f"2023-05-0{i % 9 + 1} 12:00:{i % 60:02d} ERROR worker {i}: connection reset" for i in range(1200))
    question = "Why does the worker keep failing? Here is the log:\n" + log + "\nWhat should I change?"
    msgs = [*_history(30), {"role": "user", "content": question}]
    res = ENGINES[strategy].optimize(msgs, budget=4000)
    assert res.tokens <= 4000
    last = res.messages[-1]
    assert last["role"] == "user" and last["content"].startswith("Why does the worker keep failing?")
    assert last["content"].rstrip().endswith("What should I change?") and "tokens omitted" in last["content"]
    assert res.items[-1].status == "summarized" and res.items[-1].reason.startswith("current turn cut")
    assert any("current turn" in w for w in res.report.warnings)


def test_a_short_question_survives_compacted_at_a_small_budget() -> None:
    question = "Given all of that, which invoice from the berlin office is still open, and who approved it last week?"
    msgs = [*_history(40), {"role": "user", "content": question}]
    res = ENGINES["compacted"].optimize(msgs, budget=400)
    assert res.tokens <= 400 and res.messages[-1] == {"role": "user", "content": question}


def test_a_fresh_huge_tool_result_is_cut_with_its_call_kept() -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "search_flights", "arguments": '{"to": "BER"}'}}
    result = "\n".join(f"flight {i}: LH{1000 + i} departs 08:{i % 60:02d} price {200 + i} EUR" for i in range(7000))
    msgs = [*_history(10), {"role": "user", "content": "Find me a flight to Berlin."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_9", "content": result}]
    assert count_messages(msgs, encoding="cl100k_base") > 90_000
    for strategy in STRATEGIES:
        res = ENGINES[strategy].optimize(msgs, budget=20_000)
        assert res.tokens <= 20_000
        assert res.messages[-2].get("tool_calls") == [call]
        assert res.messages[-1]["role"] == "tool" and res.messages[-1]["content"].startswith("flight 0: LH1000")
        assert "tokens omitted" in res.messages[-1]["content"]


def test_multi_level_never_separates_a_protected_result_from_its_call() -> None:
    msgs = _history(5)
    for k in range(12):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k} " * 60,
                     "kind": "decision" if k == 1 else None})
        msgs.append({"role": "assistant", "content": f"Noted result {k}. " * 20})
    msgs = [{k: v for k, v in m.items() if v is not None or k == "content"} for m in msgs]
    msgs.append({"role": "user", "content": "Summarise the decision."})
    res = ENGINES["multi_level"].optimize(msgs, budget=900)
    check_tool_pairing(res.messages)


@pytest.mark.parametrize("budget", range(41, 53))
def test_compacted_prices_its_gap_markers(budget) -> None:
    msgs = [{"role": "system", "content": "Rules first."}, {"role": "user", "content": "Hello there, agent."},
            {"role": "system", "content": "Rules last."}]
    try:
        res = ENGINES["compacted"].optimize(msgs, budget=budget)
    except BudgetError:
        assert count_messages(msgs, encoding="cl100k_base") > budget
        return
    assert res.tokens <= budget


def test_compacted_with_interleaved_system_messages_fits() -> None:
    msgs = []
    for k in range(20):
        msgs.append({"role": "system", "content": f"Rule {k}."})
        msgs.append({"role": "user", "content": f"Message {k} about the berlin office and invoice {k}."})
    for budget in (283, 300, 350, 400, 500):
        try:
            res = ENGINES["compacted"].optimize(msgs, budget=budget)
        except BudgetError:
            assert count_messages(must_be_present(msgs), encoding="cl100k_base") > budget
            continue
        assert res.tokens <= budget


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_pinned_result_keeps_its_unpinned_call(strategy) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    msgs = [*_history(20), {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "def main(): pass\n" * 30, "pinned": True},
            *_history(20, start=20)[1:], {"role": "user", "content": "And now?"}]
    needed = count_messages(must_be_present(msgs), encoding="cl100k_base")
    for budget in (needed - 1, needed, needed + 50, needed + 500):
        try:
            res = ENGINES[strategy].optimize(msgs, budget=budget)
        except BudgetError:
            assert budget < needed
            continue
        assert budget >= needed and res.tokens <= budget
        check_tool_pairing(res.messages)
        assert any(m.get("tool_calls") == [call] for m in res.messages)


def test_exact_duplicates_go_first_and_leave_no_stub() -> None:
    repeated = "Please rerun the whole test suite and paste the output. " * 5
    msgs = [*_history(6), {"role": "user", "content": repeated, "id": "first"}, *_history(6, start=6)[1:],
            {"role": "user", "content": repeated, "id": "again"}]
    full = count_messages(msgs, encoding="cl100k_base")
    res = ENGINES["optimal"].optimize(msgs, budget=full - 40)
    by_id = {r.id: r for r in res.items}
    assert by_id["first"].status == "dropped" and "exact copy of again" in by_id["first"].reason
    assert by_id["again"].status == "kept"


def test_a_chunk_of_blank_messages_is_dropped_not_summarised() -> None:
    text = "Deploy the report to Oslo on Friday. The budget meeting found an error in the invoice."
    msgs = [{"role": "user", "content": text, "pinned": True}, {"role": "assistant", "content": ""},
            {"role": "user", "content": text, "pinned": True}]
    msgs += [{"role": ("assistant", "user")[k % 2], "content": f"{text} ({k})"} for k in range(23)]
    res = ENGINES["multi_level"].optimize(msgs, budget=540)
    assert res.tokens <= 540


def test_compacted_falls_back_to_no_markers_when_their_reserve_exceeds_the_room() -> None:
    msgs = []
    for i in range(15):
        words = " ".join(f"w{i}_{k}" for k in range(4 if i == 14 else 1))
        msgs += [{"role": "user", "content": [{"type": "text", "text": f"Q{i} {words}"},
                                              {"type": "image_url", "image_url": {"url": f"https://example.com/{i}.png"}}]},
                 {"role": "assistant", "content": f"A{i} {words}"}]
    msgs.append({"role": "user", "content": "What came first?"})
    res = ENGINES["compacted"].optimize(msgs, budget=60)
    assert res.tokens <= 60 and res.messages[-1]["content"] == "What came first?"
    assert any("gap markers" in w for w in res.report.warnings)


def test_the_report_speaks_in_the_callers_sizes_and_groups_its_warnings() -> None:
    calls = [{"id": f"c{k}", "type": "function", "function": {"name": "read_logs", "arguments": "{}"}} for k in range(30)]
    msgs = [{"role": "user", "content": "Collect the logs."}]
    for call in calls:
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": call["id"], "content": f"log {call['id']} " + "status ok " * 1500})
    msgs.append({"role": "user", "content": "Which log had an error?"})
    res = ENGINES["optimal"].optimize(msgs, budget=6000)
    for r, m in zip(res.items, msgs):
        assert r.tokens_in == count_messages([m], encoding="cl100k_base") - 3
    assert res.report.tokens_in == count_messages(msgs, encoding="cl100k_base")
    assert len(res.report.warnings) <= 3 and any(w.startswith("30 tool result(s) over") for w in res.report.warnings)
    assert res.report.to_text().splitlines()[1].startswith("current turn:")


def test_anthropic_input_leaves_no_private_key_in_the_output() -> None:
    msgs = [{"role": "user", "content": "Look it up.", "id": "u1"},
            {"role": "assistant", "content": [{"type": "text", "text": "Searching."},
                                              {"type": "tool_use", "id": "tu1", "name": "search", "input": {"q": "x"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "found it"}]},
            {"role": "user", "content": "Thanks, and now?"}]
    res = ENGINES["optimal"].optimize(msgs, budget=500)
    assert all(set(m) <= {"role", "content", "name", "tool_calls", "tool_call_id"} for m in res.messages)
    assert_openai(res.messages)


def test_excerpts_were_exercised() -> None:
    # The promises checked in this file cover excerpts only if some outputs held one.
    if not EXCERPTS:
        pytest.skip("run with the property tests in this file")
    assert len(EXCERPTS) >= 20, EXCERPTS
