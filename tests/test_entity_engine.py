"""The engine's `protect_critical_entities` switch: the latest user message
naming who the user is, a goal, a promise or a deadline stays present within
its share of the budget, and every engine promise still holds."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold import BudgetError, ContextEngine, EngineConfig
from ctxfold.engine.config import STRATEGIES

from test_agent_loop import EXAMPLES, agent_conversations, check_budget_error, check_output

CRITICAL = ["My name is Caroline.", "I need to renew the lease by Friday.", "I'll send the invoice tomorrow.",
            "Let's keep the Berlin office.", "Finish it before the 15th please."]
PROTECTING = {s: ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy=s, protect_critical_entities=True))
              for s in STRATEGIES}


GOAL = "Hi, I need to renew the lease on the flat by Friday."


def _history() -> list[dict]:
    """A goal eight messages back (active, outside the protected last turns) among chat about other things."""
    msgs: list[dict] = []
    for r in range(30):
        if r == 27:
            msgs.append({"role": "user", "content": GOAL})
            msgs.append({"role": "assistant", "content": "Sure. " + "Leases differ a lot. " * 20})
            continue
        msgs.append({"role": "user", "content": f"Question {r} about the weather and some recipes, nothing more."})
        msgs.append({"role": "assistant", "content": f"Answer {r}: " + "details on weather and recipes " * 12})
    msgs.append({"role": "user", "content": "What else do you recommend about the weather and recipes?"})
    return msgs


def test_the_goal_message_stays_present_only_with_the_switch() -> None:
    msgs = _history()
    for protect, expected in ((True, {"kept", "summarized"}), (False, {"dropped"})):
        engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(protect_critical_entities=protect))
        res = engine.optimize(msgs, budget=500)
        goal = next(r for r in res.items if msgs[r.index]["content"] == GOAL)
        assert goal.status in expected, (protect, goal)
        assert res.tokens <= 500


def test_critical_messages_take_at_most_their_share_of_the_budget() -> None:
    from ctxfold.engine.options import CRITICAL_SHARE, critical_protected

    msgs = [{"role": "user", "content": f"I need to finish report {i} by Friday. " * 10} for i in range(40)]

    class _Item:
        def __init__(self, text: str, tokens: int) -> None:
            self.role, self.text, self.tokens = "user", text, tokens

    fake = [_Item(m["content"], 110) for m in msgs]
    marked = critical_protected(fake, EngineConfig(protect_critical_entities=True), 2000)  # type: ignore[arg-type]
    assert 0 < marked.sum() * 110 <= CRITICAL_SHARE * 2000
    assert marked[-1]  # the newest first
    assert not critical_protected(fake, EngineConfig(), 2000).any()  # type: ignore[arg-type]


@st.composite
def conversations_with_goals(draw):
    msgs = draw(agent_conversations())
    for m in msgs:
        if m["role"] == "user" and draw(st.integers(0, 2)) == 0:
            m["content"] = draw(st.sampled_from(CRITICAL)) + " " + m["content"]
    return msgs


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations_with_goals(), st.sampled_from(STRATEGIES), st.integers(4, 20_000))
def test_promises_hold_with_critical_protection(msgs, strategy, budget) -> None:
    try:
        res = PROTECTING[strategy].optimize(msgs, budget=budget)
    except BudgetError:
        check_budget_error(msgs, budget)
        return
    check_output(msgs, res, budget)


def test_the_report_carries_the_conversations_entities() -> None:
    msgs = [
        {"role": "user", "content": "I moved to Berlin last year and I work at Acme Inc."},
        {"role": "assistant", "content": "Berlin is a good base for Acme Inc."},
        {"role": "user", "content": "Where do I work?"},
    ]
    report = ContextEngine(encoding="cl100k_base").optimize(msgs, budget=200).report
    entities = report.entities
    assert entities is not None and report.entities is entities  # built once, on first read
    assert entities.get("Berlin") is not None and entities.get("Berlin").count == 2
    assert entities.get("Acme Inc").type == "organisation"
