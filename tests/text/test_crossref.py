"""Cross-references: pronouns and definite references resolved to their
antecedent, and annotated only when the antecedent's message was left out."""

from __future__ import annotations

import pytest

from ctxfold.errors import InvalidInputError
from ctxfold.text.crossref import annotate_references, resolve_references


@pytest.mark.parametrize(("messages", "reference", "antecedent"), [
    (["The payment service keeps timing out.", "Can you check whether it retries?"], "it", "the payment service"),
    (["I talked to Melanie Smith yesterday.", "She agreed to help."], "She", "Melanie Smith"),
    (["Lunch with Bob was fun.", "He paid for everything."], "He", "Bob"),
    (["Our plan changed again.", "I think it is better now."], "it", "our plan"),
    (["There is a bug in the parser.", "Did you fix that bug?"], "that bug", "the bug"),
    (["Please open the config file.", "Then copy the file to the server."], "the file", "the config file"),
    (["I met Sarah at work.", "The new laptop arrived.", "It is fast."], "It", "the new laptop"),
    (["Acme Corp sent the contract.", "They want it signed."], "They", "Acme Corp"),
])
def test_references_resolve(messages: list[str], reference: str, antecedent: str) -> None:
    found = [(r.text, r.antecedent) for r in resolve_references(messages)]
    assert (reference, antecedent) in found, found


@pytest.mark.parametrize("messages", [
    ["It is raining.", "Yes it is."],  # no antecedent at all
    ["I like the weather.", "She agreed."],  # no person before "she"
    ["I met Bob and I met Tom.", "He was late."],  # two people, equally likely
    ["The payment service failed.", "x", "x", "x", "x", "x", "x", "x", "x", "x", "x", "x", "x", "Is it up?"],
])
def test_unresolved_references_are_left_alone(messages: list[str]) -> None:
    assert [r for r in resolve_references(messages) if r.message == len(messages) - 1] == []
    assert annotate_references(messages, kept={len(messages) - 1}) == {}


def test_annotation_only_when_the_antecedent_was_left_out() -> None:
    messages = ["The payment service keeps timing out.", "Melanie Smith is on call.", "Can she check whether it retries?"]
    assert annotate_references(messages, kept={0, 1, 2}) == {}
    assert annotate_references(messages, kept={2}) == {
        2: "Can she [Melanie Smith] check whether it [the payment service] retries?"}
    assert annotate_references(messages, kept={1, 2}) == {2: "Can she check whether it [the payment service] retries?"}


def test_a_reference_records_where_it_is_and_where_its_antecedent_was() -> None:
    messages = ["The payment service keeps timing out.", "Can you check whether it retries?"]
    (ref,) = resolve_references(messages)
    assert (ref.message, ref.antecedent_message) == (1, 0)
    assert messages[1][ref.start:ref.end] == ref.text == "it"
    assert 0.2 <= ref.score <= 1


def test_chat_messages_are_read_like_texts() -> None:
    texts = ["I talked to Melanie Smith yesterday.", "She agreed to help."]
    chat = [{"role": "user", "content": t} for t in texts]
    assert resolve_references(chat) == resolve_references(texts)


def test_messages_must_be_a_list() -> None:
    with pytest.raises(InvalidInputError, match="messages: expected a list"):
        resolve_references("She agreed.")  # type: ignore[arg-type]
