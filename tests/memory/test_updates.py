"""Knowledge updates on SQLite and PostgreSQL: a memory that restates a stored
one merges into it; one that states it with another value (negation, number,
version, date, name) supersedes it (the old one archived, linked to its
successor); anything else is added. The pairs use the default embedder (the
static MiniLM table), so each one also checks that it reaches the cosine its
path needs: a paraphrase below ``merge_threshold`` would only be added."""

from __future__ import annotations

import pickle
import uuid

import msgspec
import numpy as np
import pytest
from ctxfold.errors import InvalidInputError, StoreError, InvalidTypeError
from ctxfold.memory import Memory, Scope
from ctxfold.memory.embedding import default_embedder, embed_texts
from ctxfold.memory.records import decoder, encode
from ctxfold.memory.updates import MERGE_THRESHOLD, SUPERSEDE_THRESHOLD, AddResult, compare
from hypothesis import assume, given, settings, strategies as st
from memory_stores import BACKENDS, StoreOpener, U1, U2, unit


MERGE = MERGE_THRESHOLD  # the stores' default merge_threshold


# (old, new, what adding new after old does, the changed slot for a supersede)
PAIRS: list[tuple[str, str, str, str]] = [
    # paraphrases: the same facts in other words
    ("The office opens at 9am", "The office opens at 9am.", "merged", ""),
    ("Office opens at 9", "The office opens at 9.", "merged", ""),
    ("The user prefers dark mode", "User prefers dark mode", "merged", ""),
    ("The user prefers dark mode", "The user prefers the dark mode", "merged", ""),
    ("Always run tests before merging", "Always run the tests before merging", "merged", ""),
    ("Deploys are allowed on Tuesday", "Deploys are allowed on Tuesdays", "merged", ""),
    ("The API key rotates every 30 days", "The API key is rotated every 30 days", "merged", ""),
    ("The staging database is on port 5433", "the staging database is on port 5433", "merged", ""),
    ("Alice owns the billing service", "The billing service is owned by Alice", "merged", ""),
    ("The CI pipeline takes 12 minutes", "CI pipeline takes 12 minutes.", "merged", ""),
    ("Our team uses Python 3.11", "Our team uses Python 3.11 now", "merged", ""),
    ("Backups run every night at 2am", "Backups run at 2am every night", "merged", ""),
    ("The release is planned for May 3", "The release is planned for May 3.", "merged", ""),
    # negation
    ("Deploys are allowed on Tuesday", "Deploys are not allowed on Tuesday", "superseded", "negation"),
    ("The user can edit the wiki", "The user cannot edit the wiki", "superseded", "negation"),
    ("Deploy on Fridays", "Never deploy on Fridays", "superseded", "negation"),
    ("The cache is enabled in production", "The cache is disabled in production", "superseded", "negation"),
    ("Guests are allowed in the lab", "Guests are forbidden in the lab", "superseded", "negation"),
    ("The service uses a connection pool", "The service does not use a connection pool", "superseded", "negation"),
    ("Alice has access to the billing dashboard", "Alice no longer has access to the billing dashboard",
     "superseded", "negation"),
    ("The user doesn't want email notifications", "The user wants email notifications", "superseded", "negation"),
    # numbers and prices
    ("We run 3 servers in production", "We run 5 servers in production", "superseded", "number"),
    ("The Pro plan costs $20 per month", "The Pro plan costs $25 per month", "superseded", "number"),
    ("The office opens at 9am", "The office opens at 10am", "superseded", "number"),
    ("The staging database is on port 5433", "The staging database is on port 5432", "superseded", "number"),
    ("The API rate limit is 100 requests per minute", "The API rate limit is 250 requests per minute",
     "superseded", "number"),
    ("The team has three engineers", "The team has four engineers", "superseded", "number"),
    ("Disk quota per user is 50GB", "Disk quota per user is 100GB", "superseded", "number"),
    ("The discount is 10% for students", "The discount is 15% for students", "superseded", "number"),
    # versions
    ("The cluster uses SDK 2.1.0", "The cluster uses SDK 3.0.0", "superseded", "version"),
    ("The build uses Python 3.11", "The build uses Python 3.12", "superseded", "number"),
    ("The mobile app targets API v2", "The mobile app targets API v3", "superseded", "version"),
    ("We pin numpy 1.26.4", "We pin numpy 2.0.1", "superseded", "version"),
    # dates, weekdays, schedules
    ("The planning meeting is on May 3", "The planning meeting is on May 10", "superseded", "date"),
    ("The planning meeting is on May 3", "The planning meeting is on June 10", "superseded", "date"),
    ("Standup is on Monday", "Standup is on Friday", "superseded", "date"),
    ("The release is due 2024-05-03", "The release is due 2024-06-01", "superseded", "date"),
    ("The audit is scheduled for March", "The audit is scheduled for April", "superseded", "date"),
    ("Backups run daily", "Backups run weekly", "superseded", "date"),
    # names and identifiers
    ("Alice owns the billing service", "Bob owns the billing service", "superseded", "name"),
    ("The on-call engineer this week is Carol", "The on-call engineer this week is Dave", "superseded", "name"),
    ("Production runs in us-east-1", "Production runs in eu-west-2", "superseded", "name"),
    ("The primary database is PostgreSQL", "The primary database is MySQL", "superseded", "name"),
    ("Config lives in settings.yaml", "Config lives in config.toml", "superseded", "name"),
    ("The feature flag is called new_checkout", "The feature flag is called checkout_v2", "superseded", "name"),
    # other facts: both stay current
    ("The user prefers dark mode", "The user prefers light mode", "added", ""),
    ("Alice owns the billing service", "Alice owns the search service", "added", ""),
    ("Alice owns the billing service", "Bob owns the search service", "added", ""),
    ("The staging database is on port 5433", "The production database is on port 5432", "added", ""),
    ("The Berlin office opens at 9am", "The Munich office opens at 8am", "added", ""),
    ("Deploys are allowed on Tuesday", "Deploys are not allowed on Friday", "added", ""),
    ("The office has 40 desks", "The Berlin office has 25 desks", "added", ""),
    ("Bob prefers short answers", "Bob prefers short answers in chat", "added", ""),  # same, below the merge cosine
]


@pytest.fixture(scope="module", params=BACKENDS)
def table_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """One store per backend for the whole pair table (each pair in its own scope)."""
    opener = StoreOpener(request.param, request, tmp_path_factory.mktemp("updates"))
    yield opener()
    opener.cleanup()


def cosine(a: str, b: str) -> float:
    v = embed_texts(default_embedder(), [a, b])
    return float(v[0] @ v[1])


TEMPLATES = [
    "We run {} servers in production",
    "The API rate limit is {} requests per minute",
    "Disk quota per user is {}GB",
    "The Pro plan costs ${} per month",
    "Invoices are due {} days after delivery",
]


def test_near_duplicates_merge(store) -> None:
    base = unit(11)
    near = base + 0.01 * unit(12)
    a = store.add(Memory(content="Office opens at 9", tags=["office"]), scope=U1, embedding=base)
    b = store.add(Memory(content="The office opens at 9.", tags=["hours"], confidence=0.9), scope=U1, embedding=near)
    assert a == b and store.memories.count(scope=U1) == 1
    merged = store.get(a, scope=U1)
    assert merged.tags == ["office", "hours"] and merged.merged == 1 and merged.content == "Office opens at 9"
    # another category or another scope does not merge
    assert store.add(Memory(content="Office opens at 9 (decided)", category="decision"), scope=U1, embedding=near) != a
    assert store.add(Memory(content="The office opens at 9.", tags=["hours"]), scope=U2, embedding=near) != ""
    assert store.memories.count(scope=U2) == 1
    # within one batch, with merge=True
    ids = store.memories.add_many(
        [Memory(content="Logs are kept"), Memory(content="The logs are kept")], scope=U2,
        embeddings=[unit(20), unit(20) + 1e-3], merge=True,
    )
    assert ids[0] == ids[1]
    # merge=False keeps both
    ids = store.memories.add_many([Memory(content="y1"), Memory(content="y2")], scope=U2, embeddings=[unit(30), unit(30)])
    assert ids[0] != ids[1]


# --- the table ------------------------------------------------------------------------------
def test_the_table_covers_every_kind_of_change() -> None:
    assert len(PAIRS) >= 40
    assert {r for _, _, a, r in PAIRS if a == "superseded"} == {"negation", "number", "version", "date", "name"}
    assert sum(a == "merged" for _, _, a, _ in PAIRS) >= 10 and sum(a == "added" for _, _, a, _ in PAIRS) >= 5


@pytest.mark.parametrize(("old", "new", "action", "reason"), PAIRS, ids=[f"{i}-{p[2]}" for i, p in enumerate(PAIRS)])
def test_reading_the_pair(old: str, new: str, action: str, reason: str) -> None:
    """The text rule alone, and the cosine the pair needs to reach it with the default embedder."""
    change, back = compare(old, new), compare(new, old)
    c = cosine(old, new)
    if action == "merged":
        assert change.kind == back.kind == "same", change
        assert c >= MERGE, f"cosine {c:.3f}: a paraphrase below the merge threshold is only added"
    elif action == "superseded":
        assert change.kind == back.kind == "update" and change.reasons == (reason,), change
        assert c >= SUPERSEDE_THRESHOLD, f"cosine {c:.3f}: below the supersede threshold the new one is only added"
    else:
        assert change.kind == "different" or c < MERGE, (change, c)


@pytest.mark.parametrize(("old", "new", "action", "reason"), PAIRS, ids=[f"{i}-{p[2]}" for i, p in enumerate(PAIRS)])
def test_the_pair_in_the_store(table_store, old: str, new: str, action: str, reason: str) -> None:
    scope = Scope(user_id="table", conversation_id=uuid.uuid4().hex)
    first = table_store.add(Memory(content=old, tags=["old"]), scope=scope)
    assert isinstance(first, AddResult) and first.action == "added" and first.replaced == ""
    second = table_store.add(Memory(content=new, tags=["new"]), scope=scope)
    assert second.action == action, (second.action, cosine(old, new))
    current = table_store.memories.all(scope=scope)
    hits = table_store.search(new, scope=scope, k=10)
    if action == "merged":
        assert second == first and second.replaced == first
        assert [m.content for m in current] == [old] and current[0].tags == ["old", "new"] and current[0].merged == 1
        assert table_store.archive.all(scope=scope) == []
    elif action == "superseded":
        assert second != first and second.replaced == first
        assert [m.id for m in current] == [second] and current[0].supersedes == first
        # search returns the current fact only, whichever text is asked for
        assert [h.id for h in hits] == [second]
        assert [h.id for h in table_store.search(old, scope=scope, k=10)] == [second]
        assert table_store.get(first, scope=scope) is None
        gone = table_store.archive.get(first, scope=scope)
        assert gone.content == old and gone.status == "archived"
        assert gone.archived_reason == "superseded" and gone.superseded_by == second
        assert [m.content for m in table_store.history(first, scope=scope)] == [old, new]
        assert [m.status for m in table_store.history(second, scope=scope)] == ["archived", "active"]
    else:
        assert second.replaced == "" and {m.content for m in current} == {old, new}
        assert {h.id for h in hits} == {first, second} and table_store.archive.all(scope=scope) == []


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TEMPLATES), st.integers(0, 10**7), st.integers(0, 10**7), st.booleans())
def test_one_changed_number_is_an_update(template: str, x: int, y: int, separators: bool) -> None:
    assume(x != y)
    show = "{:,}" if separators else "{}"
    a, b = template.format(show.format(x)), template.format(show.format(y))
    assert compare(a, b).kind == "update" and compare(a, b).reasons == ("number",)
    # thousands separators, case and a final full stop do not change what is said
    assert compare(a, template.format(x).lower() + ".").kind == "same"


@pytest.mark.parametrize("text", sorted({p[0] for p in PAIRS} | {p[1] for p in PAIRS}))
def test_a_text_restates_itself(text: str) -> None:
    for variant in (text, text[:1].lower() + text[1:], text.upper(), text + ".", f"  {text}  "):
        assert compare(text, variant).kind == "same", variant


# --- the chain, the switches and the edges ----------------------------------------------------
def test_a_chain_of_updates(store) -> None:
    ids = [store.add(Memory(content=f"The cluster uses SDK {v}"), scope=U1) for v in ("1.0.0", "2.0.0", "3.0.0")]
    assert [r.action for r in ids] == ["added", "superseded", "superseded"]
    assert ids[1].replaced == ids[0] and ids[2].replaced == ids[1]
    chain = store.history(ids[1], scope=U1)
    assert [m.id for m in chain] == ids and [m.status for m in chain] == ["archived", "archived", "active"]
    assert [m.superseded_by for m in chain] == [ids[1], ids[2], ""]
    assert [m.supersedes for m in chain] == ["", ids[0], ids[1]]
    assert [h.id for h in store.search("which SDK version", scope=U1, k=10)] == [ids[2]]
    assert store.history("no such id", scope=U1) == [] and store.history(ids[0], scope=U2) == []
    assert [m.id for m in store.history(ids[0], scope=U1.widen())] == ids
    assert {m.id for m in store.archive.all(scope=U1)} == set(ids[:2])


def test_merge_false_and_the_thresholds(opener) -> None:
    store = opener()
    old = store.add(Memory(content="Deploys are allowed on Tuesday"), scope=U1)
    new = store.add(Memory(content="Deploys are not allowed on Tuesday"), scope=U1, merge=False)
    assert new.action == "added" and store.memories.count(scope=U1) == 2
    assert store.add(Memory(content="Deploys are allowed on Tuesdays"), scope=U1, merge=False).action == "added"

    never_merge = opener(merge_threshold=None)
    scope = Scope(user_id="u1", conversation_id="never-merge")
    a = never_merge.add(Memory(content="The office opens at 9am"), scope=scope)
    a2 = never_merge.add(Memory(content="The office opens at 9am."), scope=scope)
    assert a2.action == "added"
    # an update replaces every stored statement of the old value, not only the closest
    b = never_merge.add(Memory(content="The office opens at 10am"), scope=scope)
    assert b.action == "superseded" and b.replaced in {a, a2}
    assert [m.id for m in never_merge.memories.all(scope=scope)] == [b]
    assert {(m.id, m.superseded_by) for m in never_merge.archive.all(scope=scope)} == {(a, b), (a2, b)}

    never_supersede = opener(supersede_threshold=None)
    scope = Scope(user_id="u1", conversation_id="never-supersede")
    a = never_supersede.add(Memory(content="Standup is on Monday"), scope=scope)
    assert never_supersede.add(Memory(content="Standup is on Monday."), scope=scope) == a
    assert never_supersede.add(Memory(content="Standup is on Friday"), scope=scope).action == "added"
    assert never_supersede.memories.count(scope=scope) == 2

    strict = opener(merge_threshold=0.999)  # cosine 0.983: no longer close enough to merge
    scope = Scope(user_id="u1", conversation_id="strict")
    strict.add(Memory(content="Deploys are allowed on Tuesday"), scope=scope)
    assert strict.add(Memory(content="Deploys are allowed on Tuesdays"), scope=scope).action == "added"

    for bad in (0, 1.5, True, "0.8"):
        with pytest.raises(InvalidInputError, match="supersede_threshold"):
            opener(supersede_threshold=bad)


def test_same_category_and_scope_only(store) -> None:
    old = store.add(Memory(content="Deploys are allowed on Tuesday"), scope=U1)
    decided = store.add(Memory(category="decision", content="Deploys are not allowed on Tuesday"), scope=U1)
    other = store.add(Memory(content="Deploys are not allowed on Tuesday"), scope=U2)
    assert decided.action == other.action == "added"
    assert store.get(old, scope=U1) is not None and store.archive.all(scope=U1) == []
    assert store.add(Memory(content="Deploys are not allowed on Tuesday"), scope=U1).replaced == old


def test_updates_within_one_batch(store) -> None:
    store.add(Memory(content="We run 3 servers in production"), scope=U1)
    results = store.memories.add_many(
        [
            Memory(content="Standup is on Monday"),
            Memory(content="Standup is on Friday"),  # supersedes the one before it
            Memory(content="We run 5 servers in production"),  # supersedes the stored one
            Memory(content="Standup is on Friday."),  # merges into its batch neighbour
            Memory(content="The cat is called Tom"),
        ],
        scope=U1,
        merge=True,
    )
    assert [r.action for r in results] == ["added", "superseded", "superseded", "merged", "added"]
    assert results[1].replaced == results[0] and results[3] == results[1]
    assert {m.content for m in store.memories.all(scope=U1)} == {
        "Standup is on Friday", "We run 5 servers in production", "The cat is called Tom"
    }
    assert {(m.content, m.superseded_by) for m in store.archive.all(scope=U1)} == {
        ("Standup is on Monday", results[1]), ("We run 3 servers in production", results[2])
    }
    # the bulk default does not compare (exact duplicates are still stored once)
    plain = store.memories.add_many([Memory(content="Standup is on Tuesday"), Memory(content="The cat is called Tom")], scope=U1)
    assert [r.action for r in plain] == ["added", "merged"] and store.memories.count(scope=U1) == 4


def test_supersede_is_explicit_and_atomic(store) -> None:
    old = store.add(Memory(category="decision", content="Deploy on Fridays"), scope=U1)
    # not a reading of the texts: the caller says this replaces that
    new = store.memories.supersede(old, Memory(category="decision", content="Use the release train"), scope=U1)
    assert new.action == "superseded" and new.replaced == old and store.get(new, scope=U1).supersedes == old
    assert store.archive.get(old, scope=U1).superseded_by == new
    # the same call again (a retry) changes nothing; another successor for an archived one is refused
    again = store.memories.supersede(old, Memory(category="decision", content="Use the release train"), scope=U1)
    assert (again, again.action, again.replaced) == (new, "superseded", old) and store.memories.count(scope=U1) == 1
    with pytest.raises(StoreError, match="no active memory"):
        store.memories.supersede(old, Memory(category="decision", content="Something else"), scope=U1)
    assert store.memories.count(scope=U1) == 1  # the failed call stored nothing
    with pytest.raises(InvalidTypeError, match="new"):
        store.memories.supersede(new, "text", scope=U1)  # type: ignore[arg-type]
    same = store.memories.supersede(new, Memory(category="decision", content="Use the release train"), scope=U1)
    assert same.action == "merged" and same == new and store.memories.count(scope=U1) == 1


def test_a_superseded_memory_added_again_is_current_again(store) -> None:
    a = store.add(Memory(content="Deploys are allowed on Tuesday"), scope=U1)
    b = store.add(Memory(content="Deploys are not allowed on Tuesday"), scope=U1)
    again = store.add(Memory(content="Deploys are allowed on Tuesday"), scope=U1)
    assert again == a and again.action == "superseded" and again.replaced == b
    assert [m.id for m in store.memories.all(scope=U1)] == [a]
    assert store.archive.get(a, scope=U1) is None and store.archive.get(b, scope=U1).superseded_by == a
    assert [m.id for m in store.history(a, scope=U1)] == [b, a]  # the cycle a -> b -> a ends


def test_exact_duplicate_is_merged_into_itself(store) -> None:
    a = store.add(Memory(content="The cat is called Tom", tags=["x"]), scope=U1)
    b = store.add(Memory(content="The cat is called Tom", tags=["y"]), scope=U1)
    assert b == a and b.action == "merged" and b.replaced == a
    assert store.get(a, scope=U1).tags == ["x"] and store.get(a, scope=U1).merged == 0


def test_add_result_is_a_str() -> None:
    r = AddResult("abc", "superseded", "old")
    assert r == "abc" and hash(r) == hash("abc") and {"abc": 1}[r] == 1 and r.id == "abc" and type(r.id) is str
    back = pickle.loads(pickle.dumps(r))
    assert (back, back.action, back.replaced) == ("abc", "superseded", "old")
    # ids kept in a record are stored as plain str
    stored = decoder.decode(encode(Memory(content="x", supersedes=r, metadata={"see": r, "all": [r]})))
    assert type(stored.supersedes) is str and stored.metadata == {"see": "abc", "all": ["abc"]}
    with pytest.raises(TypeError):
        encode(Memory(content="x", metadata={"bad": object()}))


def test_records_written_before_the_update_fields_still_read() -> None:
    fields = msgspec.to_builtins(Memory(content="old record", superseded_by="next"))
    del fields["supersedes"]
    record = decoder.decode(msgspec.msgpack.encode(fields))
    assert record.supersedes == "" and record.superseded_by == "next"


def test_precomputed_embeddings_pick_the_candidates(store) -> None:
    """With caller vectors the cosine still only picks candidates: the texts decide."""
    v = np.ones(16, dtype=np.float32)
    a = store.add(Memory(content="The cluster uses SDK 2.1.0"), scope=U1, embedding=v)
    b = store.add(Memory(content="The cluster uses SDK 3.0.0"), scope=U1, embedding=v)
    c = store.add(Memory(content="The cat is called Tom"), scope=U1, embedding=v)
    assert (a.action, b.action, c.action) == ("added", "superseded", "added") and b.replaced == a
