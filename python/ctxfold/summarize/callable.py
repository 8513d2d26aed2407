"""`CallableSummarizer`: summaries from any function or LLM client, sync or async."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import string
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from ctxfold._core import Tokenizer
from ctxfold._renamed import renamed_arguments
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.summarize.protocol import BaseSummarizer

__all__ = ["CallableSummarizer", "DEFAULT_PROMPT_TEMPLATE", "PROMPT_FIELDS"]

T = TypeVar("T")

DEFAULT_PROMPT_TEMPLATE = (
    "Summarize the text below in at most {target_words} words.{focus} Keep names, numbers, dates and "
    "decisions exactly as written and add nothing that is not in the text. Reply with the summary only.\n\n"
    "Text:\n{text}"
)
PROMPT_FIELDS = {
    "text": "the text to summarize",
    "budget": "the token budget of the summary",
    "target_words": "the budget in words (3/4 of the tokens), which models follow better",
    "query": "the query, or an empty string",
    "focus": "' Focus on what matters for: <query>.' when there is a query, else nothing",
}
# Old field names still filled for one release; a template using one warns.
_RENAMED_FIELDS = {"target_tokens": "budget"}


class CallableSummarizer(BaseSummarizer):
    """Summarize with any function: ``fn(prompt) -> str``, sync or async (an
    ``async def``, or a function returning an awaitable), e.g. a lambda around
    an LLM client. A returned OpenAI-, Anthropic- or Gemini-style response
    object (or dict) is read for its text.

    The prompt is ``prompt_template`` (an attribute; change it freely) filled
    with the fields of ``PROMPT_FIELDS``. Up to ``max_concurrency`` calls run at
    once (threads for a sync fn, tasks for an async one). The model's answer
    is cut to the token budget if it overshoots.

    >>> s = CallableSummarizer(lambda p: client.chat.completions.create(  # doctest: +SKIP
    ...     model="gpt-4o-mini", messages=[{"role": "user", "content": p}]))
    >>> s.summarize([long_text], budget=100)  # doctest: +SKIP
    """

    def __init__(
        self,
        fn: Callable[[str], Any],
        *,
        prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
        tokenizer: Tokenizer | None = None,
        max_concurrency: int = 4,
        always_summarize: bool = False,
    ) -> None:
        super().__init__(tokenizer=tokenizer, always_summarize=always_summarize)
        if not callable(fn):
            raise InvalidTypeError(f"fn: expected a callable taking the prompt, got {type(fn).__name__}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
            raise InvalidTypeError(f"max_concurrency: expected int, got {type(max_concurrency).__name__}")
        if max_concurrency < 1:
            raise InvalidInputError(f"max_concurrency: must be at least 1, got {max_concurrency}")
        self.fn = fn
        self.max_concurrency = max_concurrency
        self.prompt_template = prompt_template

    @property
    def prompt_template(self) -> str:
        """The prompt, with ``{text}`` and any of ``{budget}``,
        ``{target_words}``, ``{query}``, ``{focus}``."""
        return self._prompt_template

    @prompt_template.setter
    def prompt_template(self, template: str) -> None:
        fields = template_fields(template, "prompt_template")
        for old in fields & set(_RENAMED_FIELDS):
            new = _RENAMED_FIELDS[old]
            warnings.warn(
                f"CallableSummarizer.prompt_template: the field {{{old}}} is now {{{new}}}; "
                f"{{{old}}} will be removed in the next release",
                DeprecationWarning,
                stacklevel=3,
            )
        unknown = fields - set(PROMPT_FIELDS) - set(_RENAMED_FIELDS)
        if unknown:
            raise InvalidInputError(
                f"prompt_template: unknown field(s) {sorted(unknown)}; the fields are {sorted(PROMPT_FIELDS)}"
            )
        if "text" not in fields:
            raise InvalidInputError("prompt_template: must contain {text}, where the text to summarize goes")
        self._prompt_template = template

    @renamed_arguments(target_tokens="budget")
    def prompt(self, text: str, budget: int, query: str | None = None) -> str:
        """The prompt sent for one text."""
        return self._prompt_template.format(
            text=text,
            budget=budget,
            target_tokens=budget,
            target_words=max(1, budget * 3 // 4),
            query=query or "",
            focus=f" Focus on what matters for: {query}." if query else "",
        )

    def _is_async(self) -> bool:
        fn = self.fn
        # An `async def __call__` object counts too; a sync fn may still return an awaitable.
        return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)

    def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        prompts = [self.prompt(t, n, query) for t, n in zip(texts, targets)]
        if self._is_async():
            return _run_sync(self._agather(prompts))
        if len(prompts) == 1 or self.max_concurrency == 1:
            results = [self._call(p) for p in prompts]
        else:
            with concurrent.futures.ThreadPoolExecutor(min(self.max_concurrency, len(prompts))) as pool:
                results = list(pool.map(self._call, prompts))
        return [_response_text(r, i) for i, r in enumerate(results)]

    async def _asummarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        return await self._agather([self.prompt(t, n, query) for t, n in zip(texts, targets)])

    def _call(self, prompt: str) -> object:
        result = self.fn(prompt)
        if inspect.isawaitable(result):
            result = _run_sync(_await(result))
        return result

    async def _agather(self, prompts: list[str]) -> list[str]:
        limit = asyncio.Semaphore(self.max_concurrency)
        is_async = self._is_async()

        async def one(prompt: str) -> object:
            async with limit:
                result = self.fn(prompt) if is_async else await asyncio.to_thread(self.fn, prompt)
                while inspect.isawaitable(result):
                    result = await result
                return result

        results = await asyncio.gather(*(one(p) for p in prompts))
        return [_response_text(r, i) for i, r in enumerate(results)]


def template_fields(template: object, argument: str) -> set[str]:
    """The field names of a str.format template, or a clear error."""
    if not isinstance(template, str):
        raise InvalidTypeError(f"{argument}: expected str, got {type(template).__name__}")
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as e:
        raise InvalidInputError(
            f"{argument}: not a valid format string: {e} (write literal braces as {{{{ and }}}})"
        ) from e


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running loop
    (then in a fresh thread with its own loop, so the caller's loop is not re-entered)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _response_text(result: object, index: int) -> str:
    """The text of what ``fn`` returned: a str, or a chat-completion response."""
    if isinstance(result, str):
        return result
    for path in (
        ("choices", 0, "message", "content"),
        ("choices", 0, "text"),
        ("content",),
        ("text",),
        ("output_text",),
    ):
        value = _dig(result, path)
        if isinstance(value, str):
            return value
        if path == ("content",) and isinstance(value, list):  # Anthropic: a list of content blocks
            parts = [_dig(block, ("text",)) for block in value]
            if parts and all(isinstance(p, str) for p in parts):
                return "".join(p for p in parts if isinstance(p, str))
    raise InvalidTypeError(
        f"fn: returned {type(result).__name__} for texts[{index}]; expected a str "
        "(or a chat-completion response with choices[0].message.content, content blocks or .text)"
    )


def _dig(obj: object, path: tuple[object, ...]) -> object:
    for step in path:
        if isinstance(step, int):
            if not isinstance(obj, Sequence) or isinstance(obj, (str, bytes)) or len(obj) <= step:
                return None
            obj = obj[step]
        elif isinstance(obj, Mapping):
            obj = obj.get(step)
        else:
            obj = getattr(obj, str(step), None)
        if obj is None:
            return None
    return obj
