"""Topic segmentation of a dialogue: `ctxfold.segment` over the similarity
of the turns' vectors, with a prior on where a topic can change that the
vectors cannot see.

The prior (`dialogue_boundary_costs`) is a cost per turn for starting a
topic there, from what the turns say and how they join:

- after a question, the next turn answers it (a boundary there costs);
  after a closing question ("anything else?", "thanks, bye") one may start;
- a turn that opens with a question word may start a topic; a closing turn
  ("thank you, that's all") or a reply ("yes", "that is ...") rarely does;
- a turn whose content words are new to the two before it may start one;
- the two turns before and the two after a gap, compared as blocks: a gap
  whose sides are alike (against the other gaps of the dialogue) costs.

The costs are in units of a segment of the mean length whose pairs each hold
unit evidence, so they weigh the same against the similarities whatever the
dialogue's length and number of topics. Figures: docs/benchmarks.md
(dialogue segmentation).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ctxfold._core import cosine_similarity, segment
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.text.arc import content_terms

__all__ = ["dialogue_boundary_costs", "segment_dialogue"]

# The core's length exponent: a segment of L turns scores its pairs' evidence / L**0.3.
_LENGTH_EXPONENT = 0.3
# Weights of the prior, chosen on the sum of Pk over DialSeg711 and TIAGE.
_AFTER_QUESTION = 0.3
_AFTER_CLOSING = 0.15
_OPENS_WITH_QUESTION = 0.05
_CLOSING_TURN = 0.5
_REPLY = 0.1
_NOVELTY = 0.4
_ALIKE_ACROSS = 0.2
# Turns on each side of a gap compared as blocks.
_BLOCK = 2
# How much of a long turn's end (or start) the cues are looked for in.
_EDGE_CHARS = 200

_CLOSING = re.compile(
    r"anything else|something else|else (?:i|we) can|can i help|help you with|thank|bye|"
    r"have a (?:nice|good|great)|you'?re welcome|that'?s all|that is all|all set"
)
_OPENER = re.compile(r"^\W*(?:what|how|do|did|are|is|have|where|who|why|can|could|would|which|when)\b")
_REPLY_START = re.compile(
    r"^\W*(?:yes|yeah|yep|no|nope|nah|ok|okay|sure|lol|haha|wow|cool|me too|i do|i am|i have|that|it|they|he|she|"
    r"so|oh|really|great|nice|good|awesome|sounds|same|well|ah|right|not)\b"
)


def _z(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    sd = float(x.std())
    return (x - x.mean()) / sd if sd > 1e-9 else np.zeros_like(x)


def _check(texts: Sequence[str], vectors: npt.ArrayLike, n_segments: int) -> npt.NDArray[np.float64]:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"texts: expected a list of strings (one per turn), got {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts[{i}]: expected a string, got {type(t).__name__}")
    try:
        v = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InvalidTypeError(f"vectors: expected an array of numbers (one row per turn), got {type(vectors).__name__}") from e
    if not texts and v.size == 0:
        return np.zeros((0, 0))
    if v.ndim != 2 or len(v) != len(texts):
        raise InvalidInputError(
            f"vectors: expected one row per turn ({len(texts)}, dim), got shape {v.shape}; embed every turn"
        )
    if isinstance(n_segments, bool) or not isinstance(n_segments, (int, np.integer)):
        raise InvalidTypeError(f"n_segments: expected an int, got {type(n_segments).__name__}")
    if not 1 <= n_segments <= len(texts):
        raise InvalidInputError(f"n_segments: expected an int between 1 and {len(texts)} (the number of turns), got {n_segments!r}")
    return v


@functools.lru_cache(maxsize=65536)
def _cues(text: str) -> tuple[float, float]:
    """(cost of a topic starting right after this turn, cost of one starting at it), from its cue words."""
    head, tail = text[:_EDGE_CHARS].lower(), text[-_EDGE_CHARS:].lower()
    after = -_AFTER_CLOSING if _CLOSING.search(tail) else _AFTER_QUESTION if "?" in tail else 0.0
    at = 0.0
    if _OPENER.search(head):
        at -= _OPENS_WITH_QUESTION
    if _CLOSING.search(head):
        at += _CLOSING_TURN
    if _REPLY_START.search(head):
        at += _REPLY
    return after, at


def _alike_across(v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """At each gap 1..n-1, the cosine between the summed unit vectors of the
    `_BLOCK` turns before and the `_BLOCK` after (TextTiling's block comparison)."""
    n = len(v)
    unit = (v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    pad = np.zeros((n + 2 * _BLOCK, v.shape[1]), dtype=np.float32)
    pad[_BLOCK : _BLOCK + n] = unit
    left = np.zeros((n - 1, v.shape[1]), dtype=np.float32)
    right = np.zeros_like(left)
    for j in range(_BLOCK):
        left += pad[_BLOCK - j : _BLOCK + n - 1 - j]
        right += pad[_BLOCK + 1 + j : _BLOCK + n + j]
    dot = np.einsum("ij,ij->i", left, right).astype(np.float64)
    norms = (np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)).astype(np.float64)
    alike: npt.NDArray[np.float64] = dot / np.maximum(norms, 1e-12)
    return alike


def dialogue_boundary_costs(
    texts: Sequence[str],
    vectors: npt.ArrayLike,
    n_segments: int,
    *,
    terms: Sequence[Sequence[str]] | None = None,
) -> npt.NDArray[np.float64]:
    """The cost of starting a topic at each turn of a dialogue (entry 0 is
    0), for ``ctxfold.segment(..., boundary_costs=...)``: see the module
    docstring for what it weighs. `texts`: the turns in order; `vectors`: one
    embedding per turn; `n_segments`: the number of topics the costs are
    scaled for; `terms`: each turn's content words if already known
    (default ``content_terms`` of each text)."""
    v = _check(texts, vectors, n_segments)
    n = len(texts)
    costs = np.zeros(n, dtype=np.float64)
    if n < 2 or n_segments < 2:
        return costs
    words = [set(t) for t in terms] if terms is not None else [set(content_terms(t)) for t in texts]
    if len(words) != n:
        raise InvalidInputError(f"terms: expected one list of words per turn ({n}), got {len(words)}")
    cues = np.array([_cues(t) for t in texts])
    costs[1:] = cues[:-1, 0] + cues[1:, 1]
    for t in range(1, n):
        if words[t]:
            before = words[t - 1] | words[t - 2] if t >= 2 else words[t - 1]
            costs[t] -= _NOVELTY * (len(words[t] - before) / len(words[t]) - 0.5)
    if n > 2:
        costs[1:] += _ALIKE_ACROSS * _z(_alike_across(v))
    # A segment of the mean length L with unit evidence per pair scores about L**(2 - exponent).
    costs[1:] *= (n / n_segments) ** (2 - _LENGTH_EXPONENT)
    return costs


def segment_dialogue(
    texts: Sequence[str],
    vectors: npt.ArrayLike,
    n_segments: int,
    *,
    terms: Sequence[Sequence[str]] | None = None,
) -> npt.NDArray[np.int64]:
    """Topic boundaries of a dialogue (the index of the first turn of every
    topic but the first, as ``ctxfold.segment`` returns them): the exact
    segmentation of the turns' cosine similarities into `n_segments` topics
    under the prior of `dialogue_boundary_costs`. `texts`: the turns in order
    (one string each, e.g. message contents); `vectors`: one embedding per
    turn (``ctxfold.Embedder`` vectors segment best)."""
    v = _check(texts, vectors, n_segments)
    if len(texts) < 2 or n_segments < 2:
        return np.zeros(0, dtype=np.int64)
    costs = dialogue_boundary_costs(texts, v, n_segments, terms=terms)
    return segment(np.asarray(cosine_similarity(v.astype(np.float32)), dtype=np.float64), n_segments=n_segments,
                   boundary_costs=costs)
