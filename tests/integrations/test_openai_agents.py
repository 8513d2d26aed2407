"""ctxfold.integrations.openai_agents against the real Agents SDK: a
`Runner.run` with a fake `Model` and `FitSession` over a `SQLiteSession`
holding a 200-item history; `fit_items` on items with reasoning and hosted
tool calls; the example run as a script."""

from __future__ import annotations

import asyncio
import json
import runpy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents", reason="needs openai-agents (the integrations extra)")
pytest.importorskip("anthropic", reason="needs the anthropic SDK (dev extras)")

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from openai.types.responses import ResponseInputItemParam  # noqa: E402
from openai_agents_session import reorder_check_model  # noqa: E402
from scripted_agents_model import ScriptedModel, reply  # noqa: E402
from sdk_checks import type_problems  # noqa: E402

from ctxfold import ContextEngine, EngineConfig, InvalidInputError, InvalidTypeError  # noqa: E402
from ctxfold.integrations.openai_agents import FitSession, _units, fit_items  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@function_tool
def stock(item: str) -> str:
    """Units in stock."""
    return f"{item}: 12 units"


def history(turns: int = 50) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(turns):
        items.append({"role": "user", "content": f"How many units of part P-{i} are left? Reorder point {i % 7 + 3}."})
        if i % 5 == 0:
            items.append({"type": "reasoning", "id": f"rs_{i}", "summary": [{"type": "summary_text", "text": "Check stock."}]})
        items.append({"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "stock",
                      "arguments": json.dumps({"item": f"P-{i}"})})
        items.append({"type": "function_call_output", "call_id": f"call_{i}",
                      "output": f"P-{i}: {i % 20} units; " + "bin A-3, counted Monday; " * 14})
        items.append(reply(f"{i % 20} units of P-{i} are left.", i).model_dump(exclude_unset=True))
    return items


def item_problems(items: list[Any]) -> list[str]:
    """Each item a valid Responses input item; every function call answered
    by one output after it and every output answering a call before it; a
    reasoning item followed by what it produced."""
    problems = [
        p for i, item in enumerate(items)
        for p in type_problems(ResponseInputItemParam, item, f"items[{i}]", "ResponseInputItemParam")
    ]
    open_calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            open_calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in open_calls:
                problems.append(f"items[{i}]: output for {item['call_id']} answers no call before it")
            open_calls.discard(item["call_id"])
            answered.add(item["call_id"])
        elif kind == "reasoning" and (i + 1 == len(items) or items[i + 1].get("type") not in ("function_call", "message", None)):
            problems.append(f"items[{i}]: a reasoning item not followed by a call or message")
    problems += [f"call {c} is never answered" for c in sorted(open_calls)]
    return problems


def chat_tokens(items: list[Any], engine: ContextEngine) -> int:
    """The engine's count of `items` as the adapter converts them."""
    return engine.count([u.message for u in _units(items)])


def test_runner_with_fit_session(tmp_path: Path) -> None:
    set_tracing_disabled(True)
    budget = 2000
    engine = ContextEngine()

    async def run() -> tuple[ScriptedModel, FitSession, list[Any], list[Any], Any]:
        store = SQLiteSession("chat", str(tmp_path / "sessions.db"))
        past = history(50)
        await store.add_items(past)
        model = reorder_check_model("12 units of P-7: no reorder needed.")
        agent = Agent(name="stock", instructions="Answer stock questions.", model=model, tools=[stock])
        session = FitSession(store, budget=budget, engine=engine)
        result = await Runner.run(agent, "Do we need to reorder P-7?", session=session)
        return model, session, past, await store.get_items(), result

    model, session, past, stored, result = asyncio.run(run())

    assert len(past) >= 200 and chat_tokens(past, engine) > 4 * budget
    assert result.final_output == "12 units of P-7: no reorder needed."
    assert len(model.inputs) == 2
    first, second = model.inputs
    # The first call: the fitted history, then the new question.
    assert first[-1] == {"role": "user", "content": "Do we need to reorder P-7?"}
    fitted_history = first[:-1]
    assert chat_tokens(fitted_history, engine) <= budget
    assert session.last_result.tokens <= budget
    assert not item_problems(first), item_problems(first)
    # Kept items are the stored items as they were.
    stored_json = [json.dumps(i, sort_keys=True) for i in past]
    assert sum(json.dumps(i, sort_keys=True) in stored_json for i in fitted_history) > 10
    # The second call adds this run's call and its output.
    assert [i.get("type") for i in second[-2:]] == ["function_call", "function_call_output"]
    assert not item_problems(second), item_problems(second)
    # The store keeps everything: the history and this run's four items.
    assert len(stored) == len(past) + 4
    assert [json.dumps(i, sort_keys=True) for i in stored[: len(past)]] == stored_json


def test_limit_reads_and_writes_go_to_the_wrapped_session(tmp_path: Path) -> None:
    async def run() -> None:
        store = SQLiteSession("s", str(tmp_path / "s.db"))
        session = FitSession(store, budget=500)
        await session.add_items(history(20))
        assert session.session_id == "s" and session.session_settings is None
        assert await session.get_items(limit=3) == await store.get_items(limit=3)
        fitted = await session.get_items()
        assert len(fitted) < len(await store.get_items())
        popped = await session.pop_item()
        assert popped["role"] == "assistant" and len(await store.get_items()) == len(history(20)) - 1
        await session.clear_session()
        assert await store.get_items() == [] and await session.get_items() == []

    asyncio.run(run())


def test_fit_items_shortens_keeps_pairs_and_reasoning() -> None:
    items = history(40)
    # A hosted tool call and a computer call with its output: kept or dropped whole.
    items[10:10] = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "P-2 supplier"}},
    ]
    engine = ContextEngine(config=EngineConfig(strategy="compacted"))
    fitted = fit_items(items, budget=1500, engine=engine)
    assert not item_problems(fitted), item_problems(fitted)
    assert chat_tokens(fitted, engine) <= 1500
    cleared = [i for i in fitted if i.get("type") == "function_call_output" and i not in items]
    # Shortened outputs are placeholders or summaries, whichever the plan valued more for their size.
    assert cleared and all("omitted to save context" in i["output"] or i["output"].startswith("[summary] ")
                           for i in cleared)
    markers = [i for i in fitted if i.get("role") == "user" and i["content"].startswith("[... ")]
    assert markers
    whole = fit_items(items, budget=100_000, engine=engine)
    assert len(whole) == len(items) and all(a is b for a, b in zip(whole, items))
    # Every reasoning item still comes right before the call it went with.
    for k, item in enumerate(fitted):
        if item.get("type") == "reasoning":
            n = int(item["id"].split("_")[1])
            assert fitted[k + 1].get("call_id") == f"call_{n}"


def test_shortened_assistant_message_keeps_its_item_shape() -> None:
    items: list[dict[str, Any]] = []
    for i in range(12):
        question = f"Describe site {i}. " + "Give every detail. " * 20
        answer = f"Site {i}: " + " ".join(f"building {k} has {k + i} floors." for k in range(40))
        items.append({"role": "user", "content": [{"type": "input_text", "text": question}]})
        items.append(reply(answer, i).model_dump(exclude_unset=True))
    items.append({"role": "user", "content": "Which site had the tallest building?"})
    fitted = fit_items(items, budget=1200, engine=ContextEngine(config=EngineConfig(strategy="windowed")))
    assert not item_problems(fitted), item_problems(fitted)
    changed = [i for i in fitted if not any(i is o for o in items)]
    assert any(i.get("role") == "assistant" for i in changed) and any(i.get("role") == "user" for i in changed)
    for item in changed:
        assert item["content"][0]["text"].startswith(("[summary] ", "[excerpt] "))
        if item["role"] == "assistant":
            # Same item (id, status, type), the output_text replaced.
            original = next(o for o in items if o.get("id") == item["id"])
            assert set(item) == set(original) and item["status"] == "completed"
            assert item["content"][0]["type"] == "output_text"
        else:
            assert set(item) == {"role", "content"} and item["content"][0]["type"] == "input_text"
    assert fitted[-1] is items[-1]


def test_argument_errors() -> None:
    with pytest.raises(InvalidTypeError, match="session"):
        FitSession(object(), budget=100)
    with pytest.raises(InvalidInputError, match="call_id"):
        fit_items([{"type": "function_call", "name": "f", "arguments": "{}"}], budget=100)
    with pytest.raises(InvalidTypeError, match="items"):
        fit_items("hello", budget=100)


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / "openai_agents_session.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "stored after the run: 204 items" in out and "answer:" in out


@st.composite
def item_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random stored histories: questions, reasoning, assistant text before
    parallel function calls and their outputs, hosted tool calls, answers."""
    out: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 25))):
        words = " ".join(f"w{i}_{k}" for k in range(draw(st.integers(1, 150))))
        out.append({"role": "user", "content": f"Q{i} {words}"})
        if draw(st.booleans()):
            if draw(st.booleans()):
                out.append({"type": "reasoning", "id": f"rs_{i}", "summary": []})
            if draw(st.booleans()):
                out.append(reply(f"Let me check {i}.", 1000 + i).model_dump(exclude_unset=True))
            n = draw(st.integers(1, 3))
            out += [{"type": "function_call", "id": f"fc_{i}_{j}", "call_id": f"call_{i}_{j}", "name": "stock",
                     "arguments": json.dumps({"item": words[:40]})} for j in range(n)]
            out += [{"type": "function_call_output", "call_id": f"call_{i}_{j}", "output": f"out {words}"} for j in range(n)]
        if draw(st.integers(0, 6)) == 0:
            out.append({"type": "web_search_call", "id": f"ws_{i}", "status": "completed",
                        "action": {"type": "search", "query": "supplier"}})
        out.append(reply(f"A{i} {words[:300]}", i).model_dump(exclude_unset=True))
    out.append({"role": "user", "content": "What came first?"})
    return out


_ENGINE = ContextEngine()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_histories(), st.integers(60, 3000))
def test_random_histories_fit_and_stay_valid(items: list[dict[str, Any]], budget: int) -> None:
    fitted = fit_items(items, budget=budget, engine=_ENGINE)
    assert not item_problems(fitted), item_problems(fitted)
    assert chat_tokens(fitted, _ENGINE) <= budget
    assert fitted[-1] is items[-1]
