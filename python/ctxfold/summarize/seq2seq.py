"""`OnnxSeq2SeqSummarizer`: abstractive summaries from an encoder/decoder ONNX export."""

from __future__ import annotations

import os

from ctxfold._core import Tokenizer
from ctxfold.errors import InvalidInputError
from ctxfold.models import hf_tokenizer, verified_path
from ctxfold.summarize.seq2seq_model import GenerationConfig, Seq2SeqModel, generate
from ctxfold.summarize.callable import template_fields
from ctxfold.summarize.protocol import BaseSummarizer

__all__ = ["OnnxSeq2SeqSummarizer"]

# Model tokenizers (BART BPE, T5 SentencePiece) spend more tokens than o200k on
# English; generating up to twice the target (+ a few) leaves the final cut room
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
        if query_template is not None and template_fields(query_template, "query_template") != {"text", "query"}:
            raise InvalidInputError("query_template: expected a str with the fields {text} and {query}, and no others")
        self.query_template = query_template
        limit = max_input_tokens or config.get("max_position_embeddings") or config.get("n_positions") or 512
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
            raise InvalidInputError(f"max_input_tokens: expected an int of at least 2, got {limit!r}")
        self.max_input_tokens = limit
        self.truncate_input = bool(truncate_input)
        self._model_tokenizer = hf_tokenizer(
            verified_path(self.model.model_dir, "tokenizer.json", None)[0], limit if truncate_input else None,
            "re-export the model with optimum-cli",
        )
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
