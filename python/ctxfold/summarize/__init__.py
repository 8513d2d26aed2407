"""Summarizers: one protocol (`protocol.Summarizer`), several engines.

- `extractive.ExtractiveSummarizer`: source sentences only (the default);
- `callable.CallableSummarizer`: any function or LLM client;
- `seq2seq.OnnxSeq2SeqSummarizer`: an encoder/decoder ONNX export
  (`seq2seq_model` runs it);
- `head_tail.HeadTailSummarizer`: the model-free cut;
- `compress.compress`: a long text summarised chunk by chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxfold._lazy import lazy_attributes

_LAZY = {
    "Summarizer": "ctxfold.summarize.protocol",
    "BaseSummarizer": "ctxfold.summarize.protocol",
    "ExtractiveSummarizer": "ctxfold.summarize.extractive",
    "CallableSummarizer": "ctxfold.summarize.callable",
    "OnnxSeq2SeqSummarizer": "ctxfold.summarize.seq2seq",
    "HeadTailSummarizer": "ctxfold.summarize.head_tail",
    "compress": "ctxfold.summarize.compress",
    "CompressionResult": "ctxfold.summarize.compress",
    "CompressedChunk": "ctxfold.summarize.compress",
}
__all__ = list(_LAZY)
__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)

if TYPE_CHECKING:
    from ctxfold.summarize.callable import CallableSummarizer as CallableSummarizer
    from ctxfold.summarize.compress import CompressedChunk as CompressedChunk, CompressionResult as CompressionResult, compress as compress
    from ctxfold.summarize.extractive import ExtractiveSummarizer as ExtractiveSummarizer
    from ctxfold.summarize.head_tail import HeadTailSummarizer as HeadTailSummarizer
    from ctxfold.summarize.protocol import BaseSummarizer as BaseSummarizer, Summarizer as Summarizer
    from ctxfold.summarize.seq2seq import OnnxSeq2SeqSummarizer as OnnxSeq2SeqSummarizer
