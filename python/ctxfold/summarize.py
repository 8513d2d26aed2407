"""Summarizers: one protocol, several engines.

Every summarizer answers ``summarize(texts, target_tokens, query=None)`` with
one summary per text, each at most ``target_tokens`` tokens as counted by the
summarizer's `Tokenizer` (the project's exact counter; ``o200k_base`` unless
another is passed), and ``await asummarize(...)`` with the same result. A
text that already fits its target is returned unchanged (no model call)
unless ``always_summarize=True``. Whatever an engine writes is cut on a token
boundary (preferably after the last whole sentence) if it overshoots.

- `CallableSummarizer(fn)`: any function or LLM client, sync or async;
- `OnnxSeq2SeqSummarizer(model_dir)`: an encoder/decoder exported by Optimum;
- `BaseSummarizer`: what a new engine subclasses (implement ``_summarize_many``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import numbers
import os
import re
import string
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ctxfold._core import Tokenizer
from ctxfold.errors import InvalidInputError, InvalidTypeError, ModelError
from ctxfold.models import verified_path
from ctxfold.seq2seq import GenerationConfig, Seq2SeqModel, generate
from ctxfold.tokens import get_tokenizer

__all__ = [
    "Summarizer",
    "BaseSummarizer",
    "CallableSummarizer",
    "OnnxSeq2SeqSummarizer",
    "DEFAULT_PROMPT_TEMPLATE",
    "fit_to_tokens",
    "check_texts",
    "check_targets",
]

T = TypeVar("T")

# A sentence end: . ! ? (or an ellipsis) possibly closed by a quote or bracket, then a space.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s)")


@runtime_checkable
class Summarizer(Protocol):
    """What `ContextEngine` calls to shorten texts. ``target_tokens`` is one
    int for every text or one per text; each summary fits its target."""

    def summarize(
        self, texts: Sequence[str], target_tokens: int | Sequence[int], query: str | None = None
    ) -> list[str]: ...

    async def asummarize(
        self, texts: Sequence[str], target_tokens: int | Sequence[int], query: str | None = None
    ) -> list[str]: ...


def fit_to_tokens(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """``text`` stripped, or, if it counts more than ``max_tokens``, its longest
    start that fits, shortened to the last sentence end when that keeps at least
    half of it (a summary that stops mid-sentence reads worse than one that is
    a little shorter)."""
    text = text.strip()
    if tokenizer.count_until(text, max_tokens) is not None:
        return text
    cut = tokenizer.truncate(text, max_tokens).rstrip()
    ends = [m.end() for m in _SENTENCE_END.finditer(cut + " ")]
    if ends and ends[-1] >= len(cut) / 2:
        cut = cut[: ends[-1]]
    if tokenizer.count_until(cut, max_tokens) is None:  # BPE gives no prefix guarantee; truncate decides
        cut = tokenizer.truncate(cut, max_tokens)
    return cut


class BaseSummarizer:
    """Argument checks, the fits-already shortcut and the final cut, shared by
    every summarizer. Subclasses implement ``_summarize_many(texts, targets,
    query)`` returning one raw summary per text (it is cut afterwards) and may
    override ``_asummarize_many`` for native async."""

    def __init__(self, *, tokenizer: Tokenizer | None = None, always_summarize: bool = False) -> None:
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise InvalidTypeError(
                "tokenizer: expected a ctxfold.Tokenizer (e.g. get_tokenizer(model=...)), "
                f"got {type(tokenizer).__name__}"
            )
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer()
        self.always_summarize = bool(always_summarize)

    def summarize(
        self, texts: Sequence[str], target_tokens: int | Sequence[int], query: str | None = None
    ) -> list[str]:
        """One summary per text, each within its token target."""
        items, targets, todo = self._plan(texts, target_tokens, query)
        raw = self._summarize_many([items[i] for i in todo], [targets[i] for i in todo], query) if todo else []
        return self._finish(items, targets, todo, raw)

    async def asummarize(
        self, texts: Sequence[str], target_tokens: int | Sequence[int], query: str | None = None
    ) -> list[str]:
        """`summarize` for async callers."""
        items, targets, todo = self._plan(texts, target_tokens, query)
        raw = await self._asummarize_many([items[i] for i in todo], [targets[i] for i in todo], query) if todo else []
        return self._finish(items, targets, todo, raw)

    def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        raise NotImplementedError

    async def _asummarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        # Model inference releases the GIL, so a worker thread keeps the event loop free.
        return await asyncio.to_thread(self._summarize_many, texts, targets, query)

    def _plan(
        self, texts: Sequence[str], target_tokens: int | Sequence[int], query: str | None
    ) -> tuple[list[str], list[int], list[int]]:
        items = check_texts(texts)
        targets = check_targets(target_tokens, len(items))
        if query is not None and not isinstance(query, str):
            raise InvalidTypeError(f"query: expected str or None, got {type(query).__name__}")
        if self.always_summarize:
            return items, targets, list(range(len(items)))
        todo = [i for i, (t, n) in enumerate(zip(items, targets)) if self.tokenizer.count_until(t, n) is None]
        return items, targets, todo

    def _finish(self, items: list[str], targets: list[int], todo: list[int], raw: Sequence[object]) -> list[str]:
        if len(raw) != len(todo):
            raise ModelError(f"{type(self).__name__}: got {len(raw)} summaries for {len(todo)} texts")
        out = list(items)
        for i, summary in zip(todo, raw):
            if not isinstance(summary, str):
                raise InvalidTypeError(f"summary of texts[{i}]: expected str, got {type(summary).__name__}")
            out[i] = fit_to_tokens(summary, targets[i], self.tokenizer)
        return out


def check_texts(texts: object) -> list[str]:
    """``texts`` as a list of non-empty str, or a clear error naming the bad one."""
    if isinstance(texts, str):
        raise InvalidTypeError("texts: expected a list of str, got one str (wrap it in a list: [text])")
    if isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"texts: expected a list of str, got {type(texts).__name__}")
    items = list(texts)
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts[{i}]: expected str, got {type(t).__name__}")
        if not t.strip():
            raise InvalidInputError(f"texts[{i}]: empty text, nothing to summarize (leave it out of the list)")
    return items


def check_targets(target_tokens: object, count: int) -> list[int]:
    """One positive int per text, from an int or a sequence (or array) of ints."""
    scalar = isinstance(target_tokens, numbers.Integral) and not isinstance(target_tokens, bool)
    values = [target_tokens] * count if scalar else target_tokens
    if hasattr(values, "tolist") and not scalar:  # a numpy array from the planner
        values = values.tolist()
    if isinstance(target_tokens, bool) or isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidTypeError(f"target_tokens: expected an int or a list of ints, got {type(target_tokens).__name__}")
    if len(values) != count:
        raise InvalidInputError(
            f"target_tokens: got {len(values)} targets for {count} texts; pass one int or one per text"
        )
    targets = []
    for i, v in enumerate(values):
        where = "target_tokens" if scalar else f"target_tokens[{i}]"
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise InvalidTypeError(f"{where}: expected int, got {type(v).__name__}")
        if v < 1:
            raise InvalidInputError(f"{where}: must be a positive number of tokens, got {v}")
        targets.append(int(v))
    return targets


# ---- any function or LLM client ------------------------------------------------------

DEFAULT_PROMPT_TEMPLATE = (
    "Summarize the text below in at most {target_words} words.{focus} Keep names, numbers, dates and "
    "decisions exactly as written and add nothing that is not in the text. Reply with the summary only.\n\n"
    "Text:\n{text}"
)
PROMPT_FIELDS = {
    "text": "the text to summarize",
    "target_tokens": "the token target",
    "target_words": "the target in words (3/4 of the tokens), which models follow better",
    "query": "the query, or an empty string",
    "focus": "' Focus on what matters for: <query>.' when there is a query, else nothing",
}


class CallableSummarizer(BaseSummarizer):
    """Summarize with any function: ``fn(prompt) -> str``, sync or async (an
    ``async def``, or a function returning an awaitable), e.g. a lambda around
    an LLM client. A returned OpenAI-, Anthropic- or Gemini-style response
    object (or dict) is read for its text.

    The prompt is ``prompt_template`` (an attribute; change it freely) filled
    with the fields of ``PROMPT_FIELDS``. Up to ``max_concurrency`` calls run at
    once (threads for a sync fn, tasks for an async one). The model's answer
    is cut to the token target if it overshoots.

    >>> s = CallableSummarizer(lambda p: client.chat.completions.create(  # doctest: +SKIP
    ...     model="gpt-4o-mini", messages=[{"role": "user", "content": p}]))
    >>> s.summarize([long_text], target_tokens=100)  # doctest: +SKIP
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
        """The prompt, with ``{text}`` and any of ``{target_tokens}``,
        ``{target_words}``, ``{query}``, ``{focus}``."""
        return self._prompt_template

    @prompt_template.setter
    def prompt_template(self, template: str) -> None:
        fields = _template_fields(template, "prompt_template")
        unknown = fields - set(PROMPT_FIELDS)
        if unknown:
            raise InvalidInputError(
                f"prompt_template: unknown field(s) {sorted(unknown)}; the fields are {sorted(PROMPT_FIELDS)}"
            )
        if "text" not in fields:
            raise InvalidInputError("prompt_template: must contain {text}, where the text to summarize goes")
        self._prompt_template = template

    def prompt(self, text: str, target_tokens: int, query: str | None = None) -> str:
        """The prompt sent for one text."""
        return self._prompt_template.format(
            text=text,
            target_tokens=target_tokens,
            target_words=max(1, target_tokens * 3 // 4),
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


def _template_fields(template: object, argument: str) -> set[str]:
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


# ---- encoder/decoder ONNX models -------------------------------------------------------

# Model tokenizers (BART BPE, T5 SentencePiece) spend at most ~1.5x o200k's tokens
# on English; generating up to 2x the target (+ a few) leaves the final cut room
# to end on a sentence instead of stopping the model mid-thought.
MODEL_TOKENS_PER_TARGET_TOKEN = 2
MODEL_TOKENS_SLACK = 8


class OnnxSeq2SeqSummarizer(BaseSummarizer):
    """Abstractive summaries from an encoder/decoder ONNX export (T5, BART,
    Pegasus...) made by Hugging Face Optimum; no PyTorch needed at run time.

    ``model_dir`` holds ``encoder_model.onnx`` and ``decoder_model_merged.onnx``
    (or ``decoder_model.onnx`` [+ ``decoder_with_past_model.onnx``]),
    ``tokenizer.json``, ``config.json`` and optionally ``generation_config.json``;
    a ``SHA256SUMS`` file there is verified. Decoding settings default to the
    model's own (its summarization parameters, generation config, config) and
    can be overridden: ``num_beams`` (1 = greedy), ``max_new_tokens``,
    ``min_length`` (Hugging Face's meaning: counts the start token),
    ``no_repeat_ngram_size``, ``length_penalty``.

    Generation stops at ``2 * target + 8`` model tokens and ``min_length`` is
    lowered to the target, so a small target is never forced long. ``prefix``
    (default: the model's, e.g. ``"summarize: "`` for T5) is put before each
    text; with ``query_template`` (e.g. ``"Question: {query} Context: {text}"``
    for flan-t5) a query is worked into the input, otherwise it is ignored.
    Inputs longer than ``max_input_tokens`` (default: the model's position
    limit) raise ``InvalidInputError`` unless ``truncate_input=True``.
    ``variant="quantized"`` (or ``"fp16"``...) loads ``encoder_model_quantized.onnx``
    and so on; the ONNX files may also sit in an ``onnx/`` sub-directory.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        tokenizer: Tokenizer | None = None,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
        min_length: int | None = None,
        no_repeat_ngram_size: int | None = None,
        length_penalty: float | None = None,
        prefix: str | None = None,
        query_template: str | None = None,
        max_input_tokens: int | None = None,
        truncate_input: bool = False,
        threads: int | None = None,
        variant: str | None = None,
        always_summarize: bool = False,
    ) -> None:
        super().__init__(tokenizer=tokenizer, always_summarize=always_summarize)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise InvalidInputError(f"threads: expected a positive int or None, got {threads!r}")
        self.model = Seq2SeqModel(model_dir, threads=threads, variant=variant)
        self.generation: GenerationConfig = self.model.default_generation().updated(
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            min_length=min_length,
            no_repeat_ngram_size=no_repeat_ngram_size,
            length_penalty=length_penalty,
        )
        config = self.model.config
        task = (config.get("task_specific_params") or {}).get("summarization") or {}
        self.prefix = prefix if prefix is not None else str(task.get("prefix") or "")
        if query_template is not None and _template_fields(query_template, "query_template") != {"text", "query"}:
            raise InvalidInputError("query_template: expected a str with the fields {text} and {query}, and no others")
        self.query_template = query_template
        limit = max_input_tokens or config.get("max_position_embeddings") or config.get("n_positions") or 512
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
            raise InvalidInputError(f"max_input_tokens: expected an int of at least 2, got {limit!r}")
        self.max_input_tokens = limit
        self.truncate_input = bool(truncate_input)
        self._model_tokenizer = _load_model_tokenizer(self.model.model_dir, limit if truncate_input else None)
        self.generated_tokens = 0  # model tokens generated so far (for throughput reports)

    def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        return [self._one(i, t, n, query) for i, (t, n) in enumerate(zip(texts, targets))]

    def _one(self, index: int, text: str, target: int, query: str | None) -> str:
        source = self.query_template.format(text=text, query=query) if query and self.query_template else text
        ids = self._model_tokenizer.encode(self.prefix + source).ids
        if len(ids) > self.max_input_tokens:
            raise InvalidInputError(
                f"texts[{index}]: {len(ids)} model tokens, more than the model reads ({self.max_input_tokens}). "
                "Fix: split the text (semantic compression does), "
                "or pass truncate_input=True to summarize its start only."
            )
        limit = min(self.generation.max_new_tokens, MODEL_TOKENS_PER_TARGET_TOKEN * target + MODEL_TOKENS_SLACK)
        config = self.generation.updated(
            max_new_tokens=limit, min_length=min(self.generation.min_length, target + 1, limit)
        )
        out = generate(self.model, ids, config)
        self.generated_tokens += len(out)
        return str(self._model_tokenizer.decode(out, skip_special_tokens=True))


def _load_model_tokenizer(model_dir: Any, truncate_at: int | None) -> Any:
    from tokenizers import Tokenizer as HFTokenizer

    path, _ = verified_path(model_dir, "tokenizer.json", None)
    try:
        tokenizer = HFTokenizer.from_file(str(path))
    except Exception as e:
        raise ModelError(
            f"{path} is not a Hugging Face tokenizer.json: {e}. Fix: re-export the model with optimum-cli"
        ) from e
    tokenizer.no_padding()
    if truncate_at is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(truncate_at)
    return tokenizer
