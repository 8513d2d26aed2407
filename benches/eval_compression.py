"""Extractive compression on LongMemEval oracle sessions and on REALTALK
chats between two people (../shared/data): compression ratio, semantic
preservation and entity recall, from 2x to 10x.

Each history of ``longmemeval_oracle`` becomes one text (``role: content``
lines); with ``--set realtalk`` each day of a REALTALK chat does
(``Speaker: text`` lines), as the external check
../shared/checks/summary_quality.py builds them; texts of 1,500-6,000 cl100k
tokens are kept. Each is summarised by
`ExtractiveSummarizer()` (the default) to ``tokens // ratio``, and:

- ``ratio``: mean of original tokens / summary tokens (cl100k);
- ``preservation``: cosine between the token-weighted mean all-MiniLM-L6-v2
  embeddings (the shipped ONNX model, `ctxfold.Embedder`, texts cut at 256
  model tokens) of the original's and the summary's chunks, a chunk being
  lines gathered until they pass 200 cl100k tokens (so at most ~256 model
  tokens);
- ``entity recall``: the share of the capitalised names and numbers
  (``\\b[A-Z][a-z]{2,}\\b|\\b\\d+\\b``) mentioned at least twice in the original
  that the summary still contains.

The goal at 6x: preservation >= 0.85 and entity recall >= 0.75 together.
Peers in the same run: ``lead`` (the text's start cut to the target),
``mmr`` (plain MMR sentence selection, lambda 0.7, same vectors) and the
default with pruning off (``whole sentences``).

    python benches/eval_compression.py [--set lme|realtalk] [--limit 30] [--skip 0] [--ratios 2,4,6,8,10] [--peers]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", REPO.parent / "shared" / "data"))  # as benches/conftest.py
ORACLE = DATA / "conversations" / "longmemeval_oracle"
REALTALK = DATA / "conversations" / "realtalk"
ENTITY = re.compile(r"\b[A-Z][a-z]{2,}\b|\b\d+\b")
CHUNK_TOKENS = 200
GOAL_PRESERVATION, GOAL_RECALL = 0.85, 0.75


def sized(texts: Iterator[str], limit: int, skip: int, count: Callable[[str], int]) -> Iterator[str]:
    """The texts of 1,500-6,000 tokens, after the first `skip` of them, at most `limit`."""
    found = 0
    for text in texts:
        if 1500 <= count(text) <= 6000:
            found += 1
            if found > skip:
                yield text
            if found >= skip + limit:
                return


def oracle_texts() -> Iterator[str]:
    for path in sorted(ORACLE.glob("*.json")):
        d = json.loads(path.read_text(encoding="utf-8"))
        msgs = [t for sess in d["haystack_sessions"] for t in sess]
        if any(t.get("has_answer") for t in msgs):
            yield "\n".join(f"{t['role']}: {t['content']}" for t in msgs)


def realtalk_texts() -> Iterator[str]:
    """Each day of a chat (messages sharing a dia_id prefix), in file and session order."""
    for path in sorted(REALTALK.glob("Chat_*.json")):
        chat = json.loads(path.read_text(encoding="utf-8"))
        keys = sorted((k for k in chat if k.count("_") == 1 and k.startswith("session_") and k[8:].isdigit()),
                      key=lambda k: int(k[8:]))
        days: dict[str, list[str]] = {}
        for k in keys:
            for t in chat[k]:
                days.setdefault(t["dia_id"].split(":")[0], []).append(f"{t['speaker']}: {t['clean_text']}")
        yield from ("\n".join(lines) for lines in days.values())


def sessions(limit: int, skip: int, count: Callable[[str], int]) -> Iterator[str]:
    """The check's texts: histories of 1,500-6,000 tokens, in file order."""
    return sized(oracle_texts(), limit, skip, count)


def realtalk_sessions(limit: int, skip: int, count: Callable[[str], int]) -> Iterator[str]:
    """The check's REALTALK texts: days of a chat of 1,500-6,000 tokens."""
    return sized(realtalk_texts(), limit, skip, count)


class Meter:
    """The three figures, with the MiniLM embeddings of originals cached."""

    def __init__(self) -> None:
        import ctxfold

        self.tok = ctxfold.get_tokenizer(encoding="cl100k_base")
        self.embedder = ctxfold.Embedder()
        self._vectors: dict[str, np.ndarray] = {}

    def count(self, text: str) -> int:
        return int(self.tok.count(text))

    def doc_vector(self, text: str) -> np.ndarray:
        if text not in self._vectors:
            self._vectors[text] = self._doc_vector(text)
        return self._vectors[text]

    def _doc_vector(self, text: str) -> np.ndarray:
        chunks, cur = [], []
        for line in text.split("\n"):
            cur.append(line)
            if self.count("\n".join(cur)) > CHUNK_TOKENS:
                chunks.append("\n".join(cur))
                cur = []
        if cur:
            chunks.append("\n".join(cur))
        w = np.array([self.count(c) for c in chunks], dtype=np.float64)
        v = (self.embedder.embed(chunks) * w[:, None]).sum(axis=0)
        return v / np.linalg.norm(v)

    @staticmethod
    def recall(original: str, summary: str) -> float | None:
        counts: dict[str, int] = {}
        for e in ENTITY.findall(original):
            counts[e] = counts.get(e, 0) + 1
        key = {e for e, n in counts.items() if n >= 2}
        return len(key & set(ENTITY.findall(summary))) / len(key) if key else None


def evaluate(meter: Meter, texts: list[str], method: Callable[[str, int], str], ratio: float) -> dict[str, float]:
    outs, seconds = [], 0.0
    for t in texts:
        start = time.perf_counter()
        outs.append(method(t, max(1, int(meter.count(t) // ratio))))
        seconds += time.perf_counter() - start
    recalls = [r for t, o in zip(texts, outs) if (r := meter.recall(t, o)) is not None]
    return {
        "ratio": statistics.mean(meter.count(t) / max(1, meter.count(o)) for t, o in zip(texts, outs)),
        "preservation": statistics.mean(float(meter.doc_vector(t) @ meter.doc_vector(o)) for t, o in zip(texts, outs)),
        "recall": statistics.mean(recalls),
        "ms": 1e3 * seconds / len(texts),
    }


def mmr_method(lam: float = 0.7) -> Callable[[str, int], str]:
    """Plain MMR over whole sentences with the default's vectors, rendered the
    same way: the usual peer of an extractive summarizer."""
    import ctxfold
    from ctxfold.summarize.extractive import default_embedder, split_sentences

    tok = ctxfold.get_tokenizer()
    emb = default_embedder()

    def run(text: str, target: int) -> str:
        sents = split_sentences(text)
        vec = np.asarray(emb.embed([s.text for s in sents]), dtype=np.float64)
        cost = tok.count([s.text for s in sents]).astype(int) + 1
        centroid = vec.mean(axis=0)
        rel = vec @ (centroid / max(np.linalg.norm(centroid), 1e-12))
        chosen: list[int] = []
        spent = 0
        while True:
            red = (vec @ vec[chosen].T).max(axis=1) if chosen else np.zeros(len(sents))
            score = lam * rel - (1 - lam) * red
            score[chosen] = -np.inf
            score[cost > target - spent] = -np.inf
            i = int(np.argmax(score))
            if not np.isfinite(score[i]):
                break
            chosen.append(i)
            spent += cost[i]
        lines: list[str] = []
        prev = None
        for i in sorted(chosen):
            s = sents[i]
            lines.append((" " if prev is not None and prev.line == s.line else "\n") + s.text)
            prev = s
        return ctxfold.truncate("".join(lines).strip(), target)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="lme", choices=("lme", "realtalk"), help="LongMemEval oracle or REALTALK")
    parser.add_argument("--limit", type=int, default=30, help="sessions (default 30, the check's)")
    parser.add_argument("--skip", type=int, default=0, help="skip the first N qualifying sessions")
    parser.add_argument("--ratios", default="2,3,4,6,8,10", help="compression ratios to measure")
    parser.add_argument("--peers", action="store_true", help="also measure lead, plain MMR and whole sentences")
    parser.add_argument("--json", action="store_true", help="print one JSON object per row")
    args = parser.parse_args()
    folder, source = (REALTALK, realtalk_sessions) if args.set == "realtalk" else (ORACLE, sessions)
    if not folder.is_dir():
        print(f"SKIPPED: evaluation data not found at {folder} (set CTXFOLD_SHARED_DATA)")
        return 0
    import ctxfold
    from ctxfold.summarize.extractive import ExtractiveSummarizer, default_embedder

    meter = Meter()
    texts = list(source(args.limit, args.skip, meter.count))
    default = ExtractiveSummarizer()
    methods: dict[str, Callable[[str, int], str]] = {
        "extractive (default)": lambda t, n: default.summarize([t], n)[0],
    }
    if args.peers:
        whole = ExtractiveSummarizer(forms="whole")
        methods["whole sentences"] = lambda t, n: whole.summarize([t], n)[0]
        methods["plain MMR"] = mmr_method()
        methods["lead"] = lambda t, n: ctxfold.truncate(t, n, encoding="cl100k_base")
    print(f"{len(texts)} sessions of {folder.name} (skip {args.skip}); vectors: {type(default_embedder()).__name__}")
    print(f"{'method':<22} {'target':>6} {'ratio':>6} {'preserv.':>9} {'recall':>7} {'ms/text':>8}")
    ok6 = None
    for ratio in [float(r) for r in args.ratios.split(",")]:
        for name, method in methods.items():
            r = evaluate(meter, texts, method, ratio)
            if args.json:
                print(json.dumps({"method": name, "target_ratio": ratio, **r}))
            else:
                print(f"{name:<22} {ratio:>5.0f}x {r['ratio']:>5.2f}x {r['preservation']:>9.3f} {r['recall']:>7.3f}"
                      f" {r['ms']:>8.1f}")
            if ratio == 6 and name == "extractive (default)":
                ok6 = r["preservation"] >= GOAL_PRESERVATION and r["recall"] >= GOAL_RECALL
        sys.stdout.flush()
    if ok6 is not None:
        print(f"goal at 6x (preservation >= {GOAL_PRESERVATION}, recall >= {GOAL_RECALL}): "
              f"{'reached' if ok6 else 'NOT reached'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
