"""The input policy (`EngineConfig.on_invalid`) and stable message ids: one
table row per repair and per raised error, lone surrogates both ways, integer
budgets of any type, ids that survive a shifting history (hypothesis), and
messy conversations through every strategy giving valid chat requests."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold import BudgetError, ContextEngine, EngineConfig, InvalidInputError, InvalidTypeError, count_messages
from ctxfold.engine.config import STRATEGIES
from ctxfold.engine.messages import parse_messages, parse_with_repairs
from ctxfold.engine.repair import NO_RESULT
from ctxfold.tokens import get_tokenizer

TOKENIZER = get_tokenizer(encoding="cl100k_base")
REPAIR = ContextEngine(encoding="cl100k_base", embedder=None)
RAISE = ContextEngine(encoding="cl100k_base", embedder=None, config=EngineConfig(on_invalid="raise"))
ID = re.compile(r"^m-[0-9a-f]{12}$")
KINDS = {
    "orphan_tool_result", "misplaced_tool_result", "unanswered_tool_call", "duplicate_tool_call_id",
    "duplicate_tool_result", "none_content", "empty_tool_calls", "lone_surrogate",
}


def call(cid: str, name: str = "search") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": '{"q": "x"}'}}


def asks(*ids: str, content=None) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": [call(i) for i in ids]}


def result(cid: str, content="r") -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def api_problems(messages: list[dict]) -> list[str]:
    """What the OpenAI chat API would reject in `messages`: unknown keys or
    roles, missing content, empty or duplicate tool call ids, a result not in
    the run of tool messages right after its call, a call left unanswered,
    and text UTF-8 cannot encode."""
    problems: list[str] = []
    seen_calls: set[str] = set()
    pending: set[str] = set()
    in_run = False
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not set(m) <= {"role", "content", "name", "tool_calls", "tool_call_id"}:
            problems.append(f"{where}: keys {sorted(m)}")
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"{where}: role {role!r}")
        if role == "tool":
            if not in_run or m.get("tool_call_id") not in pending:
                problems.append(f"{where}: result {m.get('tool_call_id')!r} answers no open call")
            pending.discard(m.get("tool_call_id"))
            if m.get("content") is None:
                problems.append(f"{where}: tool content None")
            continue
        if pending:
            problems.append(f"{where}: calls {sorted(pending)} never answered")
        calls = m.get("tool_calls")
        in_run = role == "assistant" and bool(calls)
        pending = set()
        if "tool_calls" in m and not calls:
            problems.append(f"{where}: empty tool_calls")
        for c in calls or ():
            if c["id"] in seen_calls:
                problems.append(f"{where}: call id {c['id']!r} used twice")
            seen_calls.add(c["id"])
            pending.add(c["id"])
        if m.get("content") is None and not (role == "assistant" and calls):
            problems.append(f"{where}: content None")
    if pending:
        problems.append(f"calls {sorted(pending)} never answered")
    try:
        json.dumps(messages, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        problems.append(f"not UTF-8: {e}")
    return problems


def test_the_checker_catches_what_it_should() -> None:
    assert api_problems([user("q"), asks("c1"), result("c1")]) == []
    assert api_problems([user("q"), result("c1")])
    assert api_problems([asks("c1"), user("q"), result("c1")])
    assert api_problems([asks("c1", "c2"), result("c1")])
    assert api_problems([asks("c1"), result("c1"), asks("c1"), result("c1")])
    assert api_problems([{"role": "user", "content": None}])
    assert api_problems([{"role": "assistant", "content": "x", "tool_calls": []}])
    assert api_problems([user("a\ud800")])


# --- one row per repair --------------------------------------------------------------

REPAIRS = {
    "orphan tool result": (
        [user("q"), result("zz", "the output")],
        [user("q"), user("[tool result for call 'zz', whose tool call is not in the conversation]\nthe output")],
        [(1, "orphan_tool_result")],
    ),
    "orphan tool result with a name and text parts": (
        [user("q"), {"role": "tool", "tool_call_id": "zz", "name": "grep", "content": [{"type": "text", "text": "hit"}]}],
        [user("q"), {"role": "user", "content": [
            {"type": "text", "text": "[result of tool 'grep' for call 'zz', whose tool call is not in the conversation]"},
            {"type": "text", "text": "hit"}]}],
        [(1, "orphan_tool_result")],
    ),
    "unanswered tool call": (
        [user("q"), asks("c1", "c2"), result("c1"), user("next")],
        [user("q"), asks("c1", "c2"), result("c1"), result("c2", NO_RESULT), user("next")],
        [(1, "unanswered_tool_call")],
    ),
    "unanswered tool call at the end": (
        [user("q"), asks("c1")],
        [user("q"), asks("c1"), result("c1", NO_RESULT)],
        [(1, "unanswered_tool_call")],
    ),
    "one call id twice in a message": (
        [user("q"), asks("c1", "c1"), result("c1", "a"), result("c1", "b")],
        [user("q"), {**asks("c1"), "tool_calls": [call("c1"), call("c1_2")]}, result("c1", "a"), result("c1_2", "b")],
        [(1, "duplicate_tool_call_id")],
    ),
    "a call id reused by a later message": (
        [user("q"), asks("c1"), result("c1", "a"), asks("c1"), result("c1", "b")],
        [user("q"), asks("c1"), result("c1", "a"), asks("c1_2"), result("c1_2", "b")],
        [(3, "duplicate_tool_call_id")],
    ),
    "a renamed id avoids ids in use": (
        [asks("c1", "c1", "c1_2"), result("c1"), result("c1"), result("c1_2")],
        [{**asks("c1"), "tool_calls": [call("c1"), call("c1_3"), call("c1_2")]}, result("c1"), result("c1_3"),
         result("c1_2")],
        [(0, "duplicate_tool_call_id")],
    ),
    "an exact copy of a result": (
        [user("q"), asks("c1"), result("c1", "same"), result("c1", "same"), user("ok")],
        [user("q"), asks("c1"), result("c1", "same"), user("ok")],
        [(3, "duplicate_tool_result")],
    ),
    "a second, different result": (
        [user("q"), asks("c1"), result("c1", "first"), result("c1", "second")],
        [user("q"), asks("c1"), result("c1", "first\n\n[another result for the same tool call]\nsecond")],
        [(3, "duplicate_tool_result")],
    ),
    "a result after another message": (
        [user("q"), asks("c1"), user("hurry"), result("c1", "late")],
        [user("q"), asks("c1"), result("c1", "late"), user("hurry")],
        [(3, "misplaced_tool_result")],
    ),
    "results of two messages interleaved": (
        [asks("c1"), asks("c2"), result("c1"), result("c2")],
        [asks("c1"), result("c1"), asks("c2"), result("c2")],
        [(2, "misplaced_tool_result")],
    ),
    "None content of a user message": (
        [{"role": "user", "content": None}],
        [user("")],
        [(0, "none_content")],
    ),
    "missing content of a system message": (
        [{"role": "system"}, user("q")],
        [{"role": "system", "content": ""}, user("q")],
        [(0, "none_content")],
    ),
    "None content of a tool result": (
        [asks("c1"), result("c1", None)],
        [asks("c1"), result("c1", "")],
        [(1, "none_content")],
    ),
    "None content of an assistant message without calls": (
        [user("q"), {"role": "assistant", "content": None}],
        [user("q"), {"role": "assistant", "content": ""}],
        [(1, "none_content")],
    ),
    "empty tool_calls": (
        [user("q"), {"role": "assistant", "content": "sure", "tool_calls": []}],
        [user("q"), {"role": "assistant", "content": "sure"}],
        [(1, "empty_tool_calls")],
    ),
    "empty tool_calls and None content": (
        [user("q"), {"role": "assistant", "content": None, "tool_calls": []}],
        [user("q"), {"role": "assistant", "content": ""}],
        [(1, "empty_tool_calls"), (1, "none_content")],
    ),
    "lone surrogate": (
        [user("a\ud800b")],
        [user("a\ufffdb")],
        [(0, "lone_surrogate")],
    ),
    "surrogate pair joined": (
        [user("smile \ud83d\ude00")],
        [user("smile \U0001F600")],
        [(0, "lone_surrogate")],
    ),
    "lone surrogate in tool call arguments": (
        [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": "\udfff"}'}}]}, result("c1")],
        [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": "\ufffd"}'}}]}, result("c1")],
        [(0, "lone_surrogate")],
    ),
}


@pytest.mark.parametrize(("messages", "expected", "repairs"), list(REPAIRS.values()), ids=list(REPAIRS))
def test_each_repair(messages, expected, repairs) -> None:
    before = copy.deepcopy(messages)
    res = REPAIR.optimize(messages, budget=4000)
    assert res.messages == expected
    assert api_problems(res.messages) == []
    assert res.tokens == count_messages(res.messages, encoding="cl100k_base")
    assert [(r.index, r.kind) for r in res.report.repairs] == repairs
    ids = {it.id for it in res.items}
    for r in res.report.repairs:
        assert (r.id not in ids) == (r.kind == "duplicate_tool_result") and r.problem and r.action
        assert f"repair: messages[{r.index}] ({r.id})" in res.report.to_text()
    assert res.report.to_dict()["repairs"][0]["kind"] == repairs[0][1]
    assert messages == before, "repairs must not change the caller's messages"
    # The repaired messages are clean: parsing them again under "raise" finds nothing.
    parse_messages(res.messages, TOKENIZER, on_invalid="raise")


# --- one row per raised error ---------------------------------------------------------

RAISES = {
    "orphan tool result": ([user("q"), result("zz")], ["messages[1]", "'zz'", "no matching tool call"]),
    "orphan first": ([result("zz")], ["messages[0]", "'zz'"]),
    "unanswered call": ([user("q"), asks("c1", "c2"), result("c1")], ["messages[1]['tool_calls'][1]", "'c2'", "no tool result"]),
    "id twice in a message": ([asks("c1", "c1"), result("c1"), result("c1")], ["messages[0]['tool_calls'][1]", "'c1'"]),
    "id reused later": ([asks("c1"), result("c1"), asks("c1"), result("c1")], ["messages[2]['tool_calls'][0]", "messages[0]"]),
    "two results": ([asks("c1"), result("c1"), result("c1", "other")], ["messages[2]", "second tool result", "messages[1]"]),
    "late result": ([asks("c1"), user("hm"), result("c1")], ["messages[2]", "right after messages[0]"]),
    "None user content": ([{"role": "user", "content": None}], ["messages[0]['content']", "user message", "''"]),
    "missing tool content": ([asks("c1"), {"role": "tool", "tool_call_id": "c1"}], ["messages[1]['content']", "tool"]),
    "empty tool_calls": ([{"role": "assistant", "content": "x", "tool_calls": []}], ["messages[0]['tool_calls']", "empty"]),
    "lone surrogate in content": ([user("ok"), user("a\ud800")], ["messages[1]['content']", "surrogate", "'\\ud800'", "position 1"]),
    "lone surrogate in a part": (
        [user("ok"), {"role": "user", "content": [{"type": "text", "text": "\udc00"}]}],
        ["messages[1]['content'][0]['text']", "surrogate"],
    ),
    "lone surrogate in a caller id": ([{"role": "user", "content": "x", "id": "a\ud800"}], ["messages[0]['id']", "surrogate"]),
    "the earliest problem is named": (
        [user("fine"), {"role": "user", "content": None}, result("zz")],
        ["messages[1]['content']", "1 more problem"],
    ),
}


@pytest.mark.parametrize(("messages", "words"), list(RAISES.values()), ids=list(RAISES))
def test_each_error_under_raise(messages, words) -> None:
    with pytest.raises(InvalidInputError) as raised:
        RAISE.optimize(messages, budget=4000)
    for word in words:
        assert word in str(raised.value)
    assert "on_invalid='repair'" in str(raised.value)
    # Under "repair" the same input goes through, with a repair for each problem.
    assert REPAIR.optimize(messages, budget=4000).report.repairs


def test_raise_policy_leaves_valid_input_alone() -> None:
    msgs = [user("q"), asks("c1", "c2"), result("c2"), result("c1"), {"role": "assistant", "content": "done"}]
    res = RAISE.optimize(msgs, budget=4000)
    assert res.messages == msgs and res.report.repairs == []
    assert REPAIR.optimize(msgs, budget=4000).report.repairs == []


def test_surrogates_in_the_system_argument() -> None:
    res = REPAIR.optimize([user("q")], system="be \ud800 brief", budget=400)
    assert res.messages[0] == {"role": "system", "content": "be \ufffd brief"}
    assert [(r.index, r.id, r.kind, r.where) for r in res.report.repairs] == [(-1, "system", "lone_surrogate", "system")]
    with pytest.raises(InvalidInputError, match=r"system\['content'\].*surrogate"):
        RAISE.optimize([user("q")], system="be \ud800 brief", budget=400)


def test_a_surrogate_is_never_a_bare_unicode_error() -> None:
    bad = [user("x \ud800"), {"role": "assistant", "content": "y", "name": "bot\udfff"}]
    with pytest.raises(InvalidInputError):
        RAISE.optimize(bad, budget=400)
    with pytest.raises(InvalidInputError):
        RAISE.count(bad)
    assert REPAIR.count(bad) == count_messages([user("x \ufffd"), {"role": "assistant", "content": "y", "name": "bot\ufffd"}],
                                              encoding="cl100k_base")


def test_anthropic_messages_are_named_by_the_callers_index() -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "5 C"}]},
    ]
    res = REPAIR.optimize(msgs, budget=400)
    assert [(r.index, r.kind) for r in res.report.repairs] == [(1, "orphan_tool_result")]
    assert api_problems(res.messages) == []
    with pytest.raises(InvalidInputError, match=r"messages\[1\].*'t9'"):
        RAISE.optimize(msgs, budget=400)


def test_restore_returns_the_callers_message_not_the_repaired_one() -> None:
    orphan = {"role": "tool", "tool_call_id": "gone", "content": "old output line. " * 300}
    msgs = [orphan, user("What is the weather in Oslo?")]
    engine = ContextEngine(encoding="cl100k_base", embedder=None)
    res = engine.optimize(msgs, budget=60)
    item = res.items[0]
    assert item.status != "kept" and res.report.repairs[0].id == item.id
    assert engine.restore(item.id) == orphan
    assert api_problems(res.messages) == []


def test_repairs_hold_with_layers_and_are_reported_once() -> None:
    msgs = [user("q"), result("zz", "x"), asks("c1")]
    res = REPAIR.optimize(msgs, budget=2000, layers={"identity": "The user is Ann."})
    assert api_problems(res.messages) == []
    assert sorted(r.kind for r in res.report.repairs) == ["orphan_tool_result", "unanswered_tool_call"]


def test_count_follows_the_policy() -> None:
    msgs = [user("q"), result("zz", "x")]
    repaired = REPAIR.optimize(msgs, budget=2000).messages
    assert REPAIR.count(msgs) == count_messages(repaired, encoding="cl100k_base")
    with pytest.raises(InvalidInputError, match="zz"):
        RAISE.count(msgs)


def test_structural_errors_raise_under_both_policies() -> None:
    for engine in (REPAIR, RAISE):
        with pytest.raises(InvalidInputError, match=r"messages\[1\]\['tool_calls'\]\[0\].*'id'"):
            engine.optimize([user("q"), {"role": "assistant", "content": None, "tool_calls": [{"function": {}}]}], budget=400)
        with pytest.raises(InvalidInputError, match=r"messages\[1\].*tool_call_id"):
            engine.optimize([user("q"), {"role": "tool", "content": "x"}], budget=400)
        with pytest.raises(InvalidInputError, match=r"messages\[1\]: id 'a' is used twice"):
            engine.optimize([{**user("x"), "id": "a"}, {**user("y"), "id": "a"}], budget=400)


def test_errors_name_the_callers_index_with_a_system_argument_and_a_warm_cache() -> None:
    engine = ContextEngine(encoding="cl100k_base", embedder=None)
    engine.optimize([user("counted before")], budget=400)
    with pytest.raises(InvalidInputError, match=re.escape("messages[1]['content'][0]")):
        engine.optimize([user("counted before"), {"role": "user", "content": [{"type": "audio"}]}], system="S", budget=400)
    with pytest.raises(InvalidTypeError, match=re.escape("messages[1]")):
        engine.optimize([user("counted before"), {"role": "user", "content": [{"type": "image_url", "x": object()}]}],
                        budget=400)


def test_on_invalid_is_checked() -> None:
    with pytest.raises(InvalidInputError, match="on_invalid"):
        EngineConfig(on_invalid="ignore")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="on_invalid"):
        parse_messages([user("q")], TOKENIZER, on_invalid="ignore")  # type: ignore[arg-type]


# --- budgets ----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [np.int64(4000), np.int32(4000), np.uint16(4000), np.intc(400), 4000])
def test_any_integer_type_is_a_budget(budget) -> None:
    res = REPAIR.optimize([user("hello")], budget=budget)
    assert res.report.budget == int(budget) and type(res.report.budget) is int
    json.dumps(res.report.to_dict())


@pytest.mark.parametrize("budget", [4000.0, np.float64(4000), True, np.bool_(True), "4000"])
def test_other_budget_types_are_refused(budget) -> None:
    with pytest.raises(InvalidTypeError, match="budget"):
        REPAIR.optimize([user("hello")], budget=budget)


def test_a_tiny_numpy_budget_is_still_checked() -> None:
    with pytest.raises(InvalidInputError, match="budget"):
        REPAIR.optimize([user("hello")], budget=np.int64(2))


# --- stable ids ---------------------------------------------------------------------------


def ids_of(messages, **kwargs) -> list[str]:
    return [it.id for it in parse_messages(messages, TOKENIZER, **kwargs)]


def id_per_message(messages) -> list[str]:
    """The id of each caller message (a repair may fold a message into
    another's item or add one, so items and messages need not line up)."""
    items, repairs = parse_with_repairs(messages, TOKENIZER)
    by_source = {}
    for it in items:
        by_source.setdefault(id(it.source), it.id)
    folded = {r.index: r.id for r in repairs if r.kind == "duplicate_tool_result"}
    return [folded[i] if i in folded else by_source[id(m)] for i, m in enumerate(messages)]


def test_ids_are_short_derived_from_content_and_kept_when_given() -> None:
    msgs = [user("hi"), user("hi"), {"role": "assistant", "content": "hello"}, {**user("later"), "id": "mine"}]
    ids = ids_of(msgs)
    assert all(ID.match(i) for i in ids[:3]) and ids[3] == "mine"
    assert len(set(ids)) == 4, "identical messages get different ids"
    assert ids_of(msgs) == ids, "the same messages, the same ids"
    assert ids_of(msgs[1:])[0] == ids[0], "an identical copy is named by its number among copies"
    assert ids_of([*msgs, user("new")])[:4] == ids
    assert ids_of(msgs[2:]) == ids[2:]
    assert ids_of(msgs, system="Be brief.") == ["system", *ids]
    # Everything the API reads counts; ctxfold's metadata does not.
    assert ids_of([{**user("hi"), "name": "ann"}]) != ids[:1]
    assert ids_of([{**user("hi"), "timestamp": 5, "importance": 0.9}]) == ids[:1]
    assert ids_of([result("c1")], on_invalid="repair") != ids_of([result("c2")], on_invalid="repair")


def test_derived_ids_do_not_take_a_callers_id() -> None:
    short = ids_of([user("b")])[0]
    full = ids_of([{**user("a"), "id": short}, user("b")])[1]
    assert full.startswith(short) and re.fullmatch(r"m-[0-9a-f]{32}", full)
    third = ids_of([{**user("a"), "id": short}, {**user("c"), "id": full}, user("b")])[2]
    assert third == f"{full}-2"
    assert ids_of([{**user("a"), "id": short}, {**user("c"), "id": full}, user("b")])[2] == third


def test_an_orphan_keeps_the_id_it_had_as_a_result() -> None:
    msgs = [user("q"), asks("c1"), result("c1", "out"), user("thanks")]
    before = ids_of(msgs)
    after, repairs = parse_with_repairs(msgs[2:], TOKENIZER)
    assert [it.id for it in after] == before[2:]
    assert after[0].role == "user" and after[0].kind == "tool_result"
    assert [(r.index, r.id, r.kind) for r in repairs] == [(0, before[2], "orphan_tool_result")]


TEXTS = ["ok", "thanks", "run the tests", "the build is green", "deploy on friday", "what failed?", "42"]


@st.composite
def histories(draw, max_len: int = 18, tag: str = "old"):
    """Agent conversations with repeated texts and tool pairs; some messages
    carry the caller's id, copies of earlier messages do not."""
    msgs: list[dict] = []
    for _ in range(draw(st.integers(0, max_len))):
        kind = draw(st.sampled_from(["user", "assistant", "pair", "copy", "tagged"]))
        text = draw(st.sampled_from(TEXTS)) * draw(st.integers(1, 40))
        if kind == "pair":
            cid = f"call_{draw(st.integers(0, 10**6))}"
            msgs += [asks(cid), result(cid, text)]
        elif kind == "copy" and msgs:
            msgs.append({k: v for k, v in draw(st.sampled_from(msgs)).items() if k != "id"})
        elif kind == "tagged":
            msgs.append({**user(text), "id": f"{tag}-{len(msgs)}"})
        else:
            msgs.append({"role": "assistant" if kind == "assistant" else "user", "content": text})
    return msgs


def api_key(m: dict) -> str:
    return json.dumps({k: v for k, v in m.items() if k != "id"}, sort_keys=True)


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(0, 8), histories(max_len=5, tag="new"))
def test_ids_survive_a_shifting_history(old, k, new) -> None:
    k = min(k, len(old))
    shifted = old[k:] + new
    old_ids, new_ids = id_per_message(old), id_per_message(shifted)
    for j, message in enumerate(old[k:]):
        if all(api_key(m) != api_key(message) for m in old[:k]):
            assert new_ids[j] == old_ids[k + j]
    # In general an id names the n-th copy of a message, in any list.
    def by_copy(msgs, ids):
        seen: dict[str, int] = {}
        out = {}
        for m, i in zip(msgs, ids):
            key = api_key(m) if "id" not in m else "given " + m["id"]
            out[key, seen.get(key, 0)] = i
            seen[key] = seen.get(key, 0) + 1
        return out

    a, b = by_copy(old, old_ids), by_copy(shifted, new_ids)
    assert all(a[key] == b[key] for key in a.keys() & b.keys())
    assert id_per_message(shifted) == new_ids


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.integers(1, 8), histories(max_len=5, tag="new"), st.sampled_from(STRATEGIES))
def test_removed_messages_are_restored_exactly_after_the_history_shifted(old, k, new, strategy) -> None:
    engine = ContextEngine(encoding="cl100k_base", embedder=None, config=EngineConfig(strategy=strategy))
    originals: dict[str, dict] = {}
    removed: set[str] = set()
    for msgs in (old, old[k:] + new):
        if not msgs:
            continue
        snapshot = copy.deepcopy(msgs)
        try:
            res = engine.optimize(msgs, budget=max(60, engine.count(msgs) // 3))
        except BudgetError:
            continue
        assert api_problems(res.messages) == []
        assert msgs == snapshot
        items = parse_messages(msgs, TOKENIZER)
        originals.update((it.id, it.source) for it in items)
        removed |= {r.id for r in res.items if r.status != "kept"}
    for item_id in removed:
        assert engine.restore(item_id) == originals[item_id]


# --- messy input through every strategy ----------------------------------------------------


@st.composite
def messy(draw):
    """Conversations with every kind of problem: call ids from a small pool
    (duplicates, orphans, unanswered and late results), None contents, empty
    tool_calls, lone surrogates."""
    msgs: list[dict] = []
    pool = ["c1", "c2", "c3"]
    for _ in range(draw(st.integers(1, 16))):
        text = " ".join(draw(st.lists(st.sampled_from(TEXTS), min_size=1, max_size=30)))
        op = draw(st.sampled_from(["user", "assistant", "call", "result", "result", "none", "empty", "surrogate"]))
        if op == "call":
            ids = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2))
            msgs.append(asks(*ids, content=draw(st.sampled_from([None, text]))))
        elif op == "result":
            msgs.append(result(draw(st.sampled_from(pool)), draw(st.sampled_from([text, None]))))
        elif op == "none":
            role = draw(st.sampled_from(["user", "system", "assistant", "developer"]))
            msgs.append({"role": role} if draw(st.booleans()) else {"role": role, "content": None})
        elif op == "empty":
            msgs.append({"role": "assistant", "content": draw(st.sampled_from([None, text])), "tool_calls": []})
        elif op == "surrogate":
            msgs.append(user(text + draw(st.sampled_from(["\ud800", "\udfff", "\ud83d\ude00", "\ud83d"]))))
        else:
            msgs.append({"role": op, "content": text})
    return msgs


ENGINES = {s: ContextEngine(encoding="cl100k_base", embedder=None, config=EngineConfig(strategy=s)) for s in STRATEGIES}
RAISERS = {s: ContextEngine(encoding="cl100k_base", embedder=None, config=EngineConfig(strategy=s, on_invalid="raise"))
           for s in STRATEGIES}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy(), st.sampled_from(STRATEGIES), st.floats(0.3, 1.5))
def test_messy_input_gives_valid_requests_under_every_strategy(msgs, strategy, share) -> None:
    snapshot = copy.deepcopy(msgs)
    repaired = parse_messages(msgs, TOKENIZER)
    budget = max(80, int(share * (3 + sum(it.tokens for it in repaired))))
    try:
        res = ENGINES[strategy].optimize(msgs, budget=budget)
    except BudgetError:
        return
    assert api_problems(res.messages) == [], res.messages
    assert res.tokens <= budget
    assert res.tokens == count_messages(res.messages, encoding="cl100k_base")
    assert {r.kind for r in res.report.repairs} <= KINDS
    assert msgs == snapshot
    assert len(res.items) == len(repaired)
    if res.report.repairs:
        with pytest.raises(InvalidInputError, match=r"messages\[\d+\]"):
            RAISERS[strategy].optimize(msgs, budget=budget)
    else:
        assert RAISERS[strategy].optimize(msgs, budget=budget).messages == res.messages
