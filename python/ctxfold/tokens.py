"""Chat-message accounting on top of the exact counters of the Rust core, and
the one approximate estimator (used only when a caller asks for it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold._core import Tokenizer
from ctxfold.errors import InvalidInputError, InvalidTypeError

__all__ = ["count_messages", "message_costs", "approximate_tokens", "get_tokenizer"]

# OpenAI's framing: <|start|>{role}<|message|>{content}<|end|> costs 3 tokens
# beyond role and content; the reply is primed with <|start|>assistant<|message|>.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
# Each tool call is framed like a message of its own.
TOKENS_PER_TOOL_CALL = 3
# The low-detail price of an image; a high-detail image costs more but its
# size is not known from the message alone.
TOKENS_PER_IMAGE = 85
# The fields OpenAI's chat API reads; other keys (id, timestamp, importance...)
# are ctxfold metadata and are never sent.
COUNTED_STRING_FIELDS = ("role", "name", "tool_call_id")


def get_tokenizer(model: str | None = None, encoding: str | None = None) -> Tokenizer:
    """The tokenizer named by `model=` or `encoding=` (default `o200k_base`)."""
    if model is not None and encoding is not None:
        raise InvalidInputError("encoding: pass either model= or encoding=, not both")
    if model is not None:
        return Tokenizer.for_model(model)
    return Tokenizer.from_encoding(encoding if encoding is not None else "o200k_base")


def approximate_tokens(text: str) -> int:
    """A rough estimate (4 characters per token) for when no tokenizer is
    known. Not exact: use `count_tokens` whenever the model is known."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
    return math.ceil(len(text) / 4)


def count_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str | None = None,
    encoding: str | None = None,
    tokenizer: Tokenizer | None = None,
) -> int:
    """Tokens a list of chat messages costs as a prompt, by OpenAI's accounting.

    Per message: 3 framing tokens, plus the tokens of `role`, `content`,
    `name` (and 1 more for having a name) and `tool_call_id`. `content` may be
    a string, None, or a list of parts: text parts count their text, image
    parts count 85 tokens (OpenAI's low-detail price; the image size is not
    known here). Each entry of `tool_calls` counts 3 framing tokens plus the
    tokens of its function name and of its `arguments` JSON string, exactly as
    sent. The reply is primed with 3 more tokens. Keys the chat API does not
    read (`id`, `timestamp`, `importance`...) cost nothing.
    `gpt-3.5-turbo-0301` used 4 framing tokens per message and -1 per name.
    """
    counter = tokenizer if tokenizer is not None else get_tokenizer(model, encoding)
    per_message, per_name = TOKENS_PER_MESSAGE, TOKENS_PER_NAME
    if model == "gpt-3.5-turbo-0301":
        per_message, per_name = 4, -1
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidTypeError(f"messages: expected a list of dicts, got {type(messages).__name__}")
    texts: list[str] = []
    fixed = REPLY_PRIMING
    for i, message in enumerate(messages):
        fixed += per_message + _collect_message(message, f"messages[{i}]", texts, per_name)
    if not texts:
        return fixed
    return fixed + int(counter.count(texts).sum())


def message_costs(messages: Sequence[Mapping[str, Any]], tokenizer: Tokenizer) -> list[int]:
    """Each message's share of `count_messages` (which adds `REPLY_PRIMING`
    once on top): the sum of these plus 3 is the prompt's exact cost."""
    texts: list[str] = []
    bounds: list[tuple[int, int]] = []
    for i, message in enumerate(messages):
        start = len(texts)
        fixed = TOKENS_PER_MESSAGE + _collect_message(message, f"messages[{i}]", texts, TOKENS_PER_NAME)
        bounds.append((start, fixed))
    counts = tokenizer.count(texts).tolist() if texts else []
    ends = [b[0] for b in bounds[1:]] + [len(texts)]
    return [fixed + sum(counts[start:end]) for (start, fixed), end in zip(bounds, ends)]


def _collect_message(message: Any, where: str, texts: list[str], per_name: int) -> int:
    """Append the message's counted strings to `texts`; return its fixed extra tokens."""
    if not isinstance(message, Mapping):
        raise InvalidTypeError(f"{where}: expected a dict, got {type(message).__name__}")
    fixed = 0
    for field in COUNTED_STRING_FIELDS:
        value = message.get(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidTypeError(f"{where}[{field!r}]: expected str, got {type(value).__name__}")
        texts.append(value)
        if field == "name":
            fixed += per_name
    fixed += _collect_content(message.get("content"), f"{where}['content']", texts)
    for j, call in enumerate(message.get("tool_calls") or ()):
        fixed += TOKENS_PER_TOOL_CALL + _collect_tool_call(call, f"{where}['tool_calls'][{j}]", texts)
    return fixed


def _collect_content(content: Any, where: str, texts: list[str]) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        texts.append(content)
        return 0
    if not isinstance(content, Sequence):
        raise InvalidTypeError(f"{where}: expected str, None or a list of parts, got {type(content).__name__}")
    fixed = 0
    for k, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, Mapping) and part.get("type") in ("image_url", "image", "input_image"):
            fixed += TOKENS_PER_IMAGE
        else:
            raise InvalidInputError(
                f"{where}[{k}]: expected a text part {{'type': 'text', 'text': ...}} or an image part"
            )
    return fixed


def _collect_tool_call(call: Any, where: str, texts: list[str]) -> int:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        raise InvalidInputError(f"{where}: expected {{'function': {{'name': ..., 'arguments': ...}}}}")
    for field in ("name", "arguments"):
        value = function.get(field, "")
        if not isinstance(value, str):
            raise InvalidTypeError(
                f"{where}['function'][{field!r}]: expected str (arguments as a JSON string), got {type(value).__name__}"
            )
        texts.append(value)
    return 0
