"""Stubs of the compiled module `ctxfold._core` (private: import from `ctxfold`)."""

from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from typing import Literal, TypedDict, final, overload

from typing_extensions import deprecated

import numpy as np
import numpy.typing as npt

__all__ = [
    "__version__",
    "Tokenizer",
    "count_tokens",
    "count_until",
    "truncate",
    "encoding_for_model",
    "known_models",
    "list_encodings",
    "cosine_similarity",
    "top_k",
    "top_k_normalized",
    "quantize_rows",
    "Bm25",
    "spectral_clustering",
    "segment",
    "decay_weights",
    "BudgetAllocation",
    "negotiate_budget",
    "plan_layers",
    "select_options",
    "StaticTable",
    "EntityScanner",
    "date_reference_starts",
    "literal_starts",
]

__version__: str

@final
class Tokenizer:
    """An exact token counter: a built-in OpenAI encoding (vocabulary compiled
    into the binary, no download) or a Hugging Face ``tokenizer.json``.

    Counts equal tiktoken's ``encode_ordinary``: text such as
    ``<|endoftext|>`` is counted as plain text. Hugging Face counts exclude
    special tokens (``[CLS]``, ``<s>``) and ignore any truncation or padding
    configured in the file. Immutable and thread-safe.
    """

    @staticmethod
    def from_encoding(name: str) -> Tokenizer:
        """``"cl100k_base"`` or ``"o200k_base"``; anything else raises ``UnknownEncodingError``."""
    @staticmethod
    def for_model(model: str) -> Tokenizer:
        """The encoding of an OpenAI model (``"gpt-4o"``, ``"o3-mini"``, ``"gpt-4"``...);
        an unknown name raises ``UnknownModelError`` listing the known ones."""
    @staticmethod
    def from_file(path: str | PathLike[str]) -> Tokenizer:
        """Load a Hugging Face ``tokenizer.json``. A missing file raises
        ``MissingFileError``; a file that is not a tokenizer raises ``InvalidInputError``."""
    @property
    def name(self) -> str:
        """The encoding name, or the path the tokenizer was loaded from."""
    @overload
    def count(self, text: str) -> int:
        """Token count of one text (an ``int``) or of each text of a list (an
        ``int64`` array, computed in parallel with the GIL released)."""
    @overload
    def count(self, text: list[str] | tuple[str, ...]) -> npt.NDArray[np.int64]: ...
    def count_until(self, text: str, budget: int) -> int | None:
        """The exact count if it is at most ``budget``, else ``None``. Stops as
        soon as the budget is passed, so the cost follows ``budget``, not the text."""
    def truncate(self, text: str, budget: int, side: str = "end") -> str:
        """The longest start (``side="end"`` cuts the end) or end (``side="start"``)
        of ``text`` cut on a token boundary and on a character boundary that
        counts at most ``budget`` tokens. Returns ``text`` itself when it fits."""
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
    def decode(self, ids: list[int]) -> str:
        """Text of token ids; partial UTF-8 sequences become U+FFFD. Ids outside
        the vocabulary raise ``InvalidInputError``."""

@overload
def count_tokens(text: str, *, model: str | None = None, encoding: str | None = None) -> int:
    """Exact token count of a text (``int``) or of each text of a list (``int64`` array,
    in parallel, GIL released). ``model=`` picks the model's encoding, ``encoding=``
    names one; with neither, ``o200k_base`` (every current OpenAI model)."""
@overload
def count_tokens(
    text: list[str] | tuple[str, ...], *, model: str | None = None, encoding: str | None = None
) -> npt.NDArray[np.int64]: ...

def count_until(text: str, budget: int, *, model: str | None = None, encoding: str | None = None) -> int | None:
    """The exact count if it is at most ``budget``, else ``None``; the cost follows ``budget``."""

def truncate(
    text: str, budget: int, side: str = "end", *, model: str | None = None, encoding: str | None = None
) -> str:
    """``text`` cut to at most ``budget`` tokens on a token boundary; ``side="end"`` keeps
    the beginning, ``side="start"`` keeps the end."""

def encoding_for_model(model: str) -> str:
    """The encoding name of an OpenAI model; ``UnknownModelError`` for an unknown one."""

def known_models() -> list[str]:
    """Every model name ``encoding_for_model`` knows (prefixes end in ``*``)."""

def list_encodings() -> list[str]:
    """The built-in encodings."""

# similarity
def cosine_similarity(X: npt.ArrayLike, Y: npt.ArrayLike | None = None) -> npt.NDArray[np.floating]:
    """Cosine similarity of every row of ``X`` (n, d) with every row of ``Y``
    (m, d), or of ``X`` with itself: an (n, m) array of the input's dtype
    (float32 or float64; ``X`` and ``Y`` must agree; lists become float64).

    A zero row has similarity 0 with everything, never NaN; values are clipped
    to [-1, 1]. Rows are normalised once and multiplied with a parallel GEMM
    with the GIL released. Non-finite values, a column-count mismatch, other
    dtypes or a non-2-D input raise ``InvalidInputError`` naming the argument.
    """

def top_k(
    query: npt.ArrayLike, X: npt.ArrayLike, k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.floating]]:
    """Indices and cosine scores of the ``k`` rows of ``X`` most similar to
    ``query``, best first (ties: lower index first). A 1-D query gives 1-D
    results, a 2-D query one row per query. Fewer than ``k`` rows give all.

    Scores keep the input's dtype (float32 or float64; ``query`` and ``X``
    must agree; lists become float64): each is the cosine with its sums in
    f64, clipped to [-1, 1] and rounded to that dtype; a zero row, or a zero
    query, scores 0. ``X`` is read in place (no normalised copy, no score
    matrix) with the GIL released: one pass takes each row's dot product and
    norm together, row blocks in parallel, and keeps only the rows that a
    proven error bound cannot rule out of the top k; those are rescored
    exactly, so the ranking is that of the exact scores. Several queries go
    through a blocked matrix product that reads ``X`` once. For rows already
    unit length, ``top_k_normalized`` skips the norms. Non-finite values, a
    dimension mismatch, other dtypes, a non-2-D ``X`` or a negative ``k``
    raise ``InvalidInputError``, and a non-numeric argument or a non-int
    ``k`` ``InvalidTypeError``, each naming the argument."""

def top_k_normalized(
    query: npt.ArrayLike,
    X: npt.ArrayLike,
    k: int,
    *,
    valid: npt.NDArray[np.bool_] | None = None,
    sketch: tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.floating]]:
    """``top_k`` for rows of ``X`` that are already unit length (or zero):
    scores are plain dot products (f64-accumulated, rounded to ``X``'s dtype,
    clipped to [-1, 1]), best first, ties to the lower index; ``X`` is read in
    place (no normalised copy), row blocks in parallel with the GIL released.
    ``valid`` (bool, one per row) skips rows where it is False. ``sketch``,
    from ``quantize_rows(X)`` (float32 ``X`` only), makes the first pass read
    int8 codes (a quarter of the memory traffic); results are identical with
    or without it: each row's approximate score carries a proven error bound
    and every row whose bound reaches the k-th best lower bound is rescored
    exactly. Several queries go through one blocked matrix product that reads
    ``X`` once (the sketch is checked but only a single query reads it).
    Non-finite values raise ``InvalidInputError`` naming the argument."""

def quantize_rows(X: npt.ArrayLike) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """The int8 sketch of float32 rows for ``top_k_normalized(..., sketch=)``:
    ``codes`` (n, d) int8 with ``codes[i] * bounds[i, 0]`` approximating row
    ``i``, and ``bounds[i, 1]`` bounding the norm of the difference. Rows can
    be sketched in pieces and concatenated (each row's sketch depends on that
    row only). Non-finite values raise ``InvalidInputError``."""

@final
class Bm25:
    """Okapi BM25 over a fixed list of texts (the lexical half of relevance).

    Tokenisation (see ``Bm25.tokenize``): lowercase, split into runs of Unicode
    letters and digits, drop common English stop words, Snowball English
    stemming. idf is Lucene's ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (never
    negative); each distinct query term counts once. ``k1 >= 0``, ``0 <= b <= 1``.
    """

    def __new__(cls, texts: list[str] | tuple[str, ...], k1: float = 1.5, b: float = 0.75) -> Bm25: ...
    def scores(self, query: str) -> npt.NDArray[np.float64]:
        """The BM25 score of every text for ``query`` (0 where nothing matches)."""
    def top_k(self, query: str, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Indices and scores of the ``k`` best texts, best first (ties: lower index)."""
    @staticmethod
    def tokenize(text: str) -> list[str]:
        """The terms BM25 sees in ``text``."""
    def __len__(self) -> int: ...
# clustering and segmentation
def spectral_clustering(
    affinity: npt.ArrayLike, n_clusters: int, assign_labels: str = "discretize", seed: int = 0
) -> npt.NDArray[np.int64]:
    """Cluster labels (``int64``, values ``0..n_clusters``) of the n items of a
    precomputed ``affinity`` matrix: scikit-learn's
    ``SpectralClustering(n_clusters, affinity="precomputed",
    assign_labels=assign_labels, random_state=seed).fit_predict(affinity)``.

    Same algorithm: normalised Laplacian of the affinity (diagonal ignored),
    its ``n_clusters`` smallest eigenvectors scaled by D^-1/2 with the same
    sign convention, then ``"discretize"`` (Yu & Shi) or ``"cluster_qr"``
    (Damle et al.), with the same random stream for ``seed`` as numpy's
    ``RandomState(seed)``. Only the needed eigenvectors are computed (block
    Krylov, with float32 products), with the GIL released.

    ``affinity``: square, symmetric (to 1e-5 relative), finite, >= 0; float32
    or float64 (lists become float64). ``n_clusters`` in ``1..=n``; ``seed`` in
    ``0..=2**32-1``. Anything else raises ``InvalidInputError`` naming the
    argument. Items with no affinity to any other item get arbitrary labels,
    as in scikit-learn.
    """

def segment(
    similarity: npt.ArrayLike,
    tokens: npt.ArrayLike | None = None,
    n_segments: int | None = None,
    target_tokens: int | None = None,
    min_tokens: int = 0,
    max_tokens: int | None = None,
    boundary_costs: npt.ArrayLike | None = None,
) -> npt.NDArray[np.int64]:
    """Contiguous topic segmentation of n blocks (sentences, messages) from
    their pairwise ``similarity`` (n, n), e.g. cosine similarities of their
    embeddings.

    Returns the boundaries: an increasing ``int64`` array with the index of
    the first block of every segment except the first (K segments give K - 1
    boundaries; ``numpy.split(blocks, boundaries)`` gives the segments).

    How many segments: ``n_segments`` if given; else ``round(sum(tokens) /
    target_tokens)`` moved into the range the token limits allow; else, with
    only ``max_tokens``, the fewest segments that respect it. Passing both
    ``n_segments`` and ``target_tokens``, or none of the three, is an error.
    ``tokens`` (ints >= 0, one per block; default 1 each) only count toward
    ``min_tokens`` (a floor per segment) and ``max_tokens`` (a hard cap per
    segment); an infeasible request raises ``InvalidInputError`` saying why
    (e.g. a block alone exceeds ``max_tokens``). ``boundary_costs`` (floats,
    one per block, the first unused) is a prior on where segments start: the
    cost of a boundary before block i is subtracted from the objective
    whenever one is placed there (negative values favour it); its units are
    the objective's, see ``ctxfold.dialogue_boundary_costs`` for a scaled
    one built from the text of a dialogue.

    Where the boundaries go is the exact optimum (dynamic program) of a
    coherence objective: each similarity becomes evidence that two blocks
    share a topic, ``w = max(mean of its z-scores within the two blocks' rows,
    0) - 0.5`` (row standard deviations shrunk by ``0.3 * mean variance``),
    and a segment of L blocks scores ``sum of w over its ordered pairs /
    L**0.3``. Per-row standardisation removes the "every sentence shares
    'the'" floor of sparse similarities; the 0.5 threshold makes unrelated
    pairs cost; the exponent 0.3 is the length prior (0 lets long segments
    collect evidence quadratically, larger values push towards equal
    lengths). Ties go to the earliest boundaries. O(K * n^2 / 2)
    with K segments (less under ``max_tokens``); for K > 24 a Lagrangian
    search over the segment count runs first and is exact whenever it hits K
    (else the K-layer program runs). Memory O(K * n) beyond the input (plus
    up to 32 MB for the Lagrangian search's band of short segments). The
    input check and row statistics run on rayon's threads for large inputs,
    with the GIL released.

    Good sentence vectors matter more than the method: ``ctxfold.Embedder``
    (MiniLM) vectors segment better than ``StaticEmbedder`` ones, and both
    better than per-document TF-IDF.
    """

# recency decay
def decay_weights(
    ages: npt.ArrayLike,
    kind: str = "exponential",
    *,
    half_life: float = 10.0,
    rate: float = 1.0,
    steps: list[tuple[float, float]] | None = None,
    importance: npt.ArrayLike | None = None,
    turns_ago: npt.ArrayLike | None = None,
    unit: str = "turns",
    importance_adjust: bool = True,
    recent_turns: float = 2.0,
    recent_boost: float = 1.2,
) -> npt.NDArray[np.float64]:
    """Recency weights in [0, 1] for ages (turns or seconds ago, >= 0).

    ``weight = clip(base(age) * importance_factor * recent_factor, 0, 1)``:

    - ``kind="exponential"``: ``0.5 ** (age / half_life)``;
      ``"logarithmic"``: ``1 / (1 + rate * ln(1 + age))``;
      ``"step"``: the weight of the first ``(max_age, weight)`` step with
      ``age <= max_age`` (older: the last step's weight);
      ``"adaptive"``: exponential with half-life 20 / 10 / 5 for importance
      > 0.8 / > 0.5 / otherwise (importance defaults to 0.5).
    - importance factor (when ``importance`` is given and ``importance_adjust``):
      x1.5 above 0.8, x1 above 0.5, x0.7 otherwise.
    - recency boost: x``recent_boost`` for items with ``turns_ago < recent_turns``
      (the last two turns by default). With ``unit="turns"`` the ages are the
      turns ago; with ``unit="seconds"`` pass ``turns_ago`` to get the boost.

    Every parameter is validated (half-life and rate > 0, weights and
    importances in [0, 1], ages >= 0 and finite, steps increasing).
    """
# budget negotiation
_LayerSpec = tuple[int, int, int, float, float] | tuple[int, int, int, float, float, bool]

@final
class BudgetAllocation:
    """Tokens granted to each context layer (the result of ``negotiate_budget``
    and ``plan_layers``). ``alloc["history"]`` or ``alloc[6]`` reads one layer;
    ``alloc.to_dict()`` gives ``{name: tokens}``."""

    @property
    def allocations(self) -> npt.NDArray[np.int64]:
        """Tokens per layer, in the order given."""
    @property
    def cut(self) -> npt.NDArray[np.bool_]:
        """Per layer: ``True`` if it was dropped to 0 because its minimum did not
        fit, or is a fixed layer left below its ideal."""
    @property
    def names(self) -> list[str] | None:
        """Layer names (dict keys, ``names=``, or the standard layer names)."""
    @property
    def layers(self) -> list[tuple[int, int, int, float, float, bool]]:
        """Per layer ``(min, ideal, max, priority, elasticity, fixed)`` as negotiated
        (for ``plan_layers``: the requirements its formulas computed)."""
    @property
    def budget(self) -> int:
        """The budget that was split."""
    @property
    @deprecated("BudgetAllocation.total is now BudgetAllocation.budget")
    def total(self) -> int:
        """The old name of ``budget``; warns, and goes away in the next release."""
    @property
    def allocated(self) -> int:
        """Sum of the allocations (never above ``budget``)."""
    @property
    def unallocated(self) -> int:
        """``budget - allocated``: non-zero only when every layer that was not
        dropped is at its max."""
    def to_dict(self) -> dict[str, int] | dict[int, int]:
        """``{name: tokens}``, or ``{index: tokens}`` when the layers have no names."""
    def __getitem__(self, key: str | int, /) -> int:
        """Tokens of one layer, by name (``KeyError`` if unknown) or index."""
    def __len__(self) -> int: ...

def negotiate_budget(
    budget: int,
    layers: Sequence[_LayerSpec] | Mapping[str, _LayerSpec] | npt.NDArray[np.float64],
    names: Sequence[str] | None = None,
) -> BudgetAllocation:
    """Split ``budget`` tokens between context layers.

    Each layer is ``(min, ideal, max, priority, elasticity)`` with an optional
    sixth ``fixed`` flag (default: fixed when ``elasticity == 0``): tokens are
    whole numbers with ``min <= ideal <= max``, ``priority`` in 0..100 (higher is
    served first and cut last), ``elasticity`` in 0..1 (among equal priorities the
    more elastic layer is cut first). ``layers`` is a list of such tuples, a dict
    of them by name, or an ``(n, 5|6)`` numeric array.

    Phases:

    1. fixed layers take their ideal, the others their minimum;
    2. cut-to-fit when that does not fit: fixed layers shrink toward their
       minimum (lowest priority first); if even the minimums do not fit, layers
       are dropped to 0 from the lowest priority up (ties: more elastic, then
       earlier, first) and a dropped layer whose minimum fits in what was freed
       is re-admitted;
    3. the rest goes toward the ideals: all of them when it covers every gap,
       else shares proportional to ``(ideal - min) * priority``, water-filled so
       that no share passes its ideal;
    4. leftovers go to the elastic layers by priority up to their max, then to
       the fixed layers.

    Guarantees: the sum never exceeds ``budget``; every allocation is 0 or in
    ``[min, max]``; tokens stay unallocated only when every layer that was not
    dropped is at its max.

    Fixes to the published OpenScroll algorithm: its cut-to-fit trimmed layers
    partly below their minimum ("below this, don't include at all") and never
    cut the fixed layers, so a small budget was over-allocated; its weighted
    pass scaled shares by ``priority / 100`` against a shrinking remainder, so
    layers stayed below their ideal even when the budget covered every ideal,
    and the leftover then went to the highest-priority layer up to its max.

    Raises ``InvalidInputError`` naming the field (``layers[2].ideal``) for an
    invalid layer, ``InvalidTypeError`` for a wrong type.
    """

def plan_layers(
    budget: int,
    *,
    message_count: int = 0,
    conversation_tokens: int = 0,
    user_message_tokens: int = 0,
    topic_count: int = 0,
    entity_count: int = 0,
    active_conversation: bool | None = None,
    knowledge_depth: Literal["minimal", "standard", "deep"] = "standard",
    prioritize_history: bool = False,
    topic_bundle_tokens: int = 0,
) -> BudgetAllocation:
    """The eight standard layers — ``identity``, ``preferences``, ``topic``,
    ``entity``, ``conversation_arc``, ``retrieval`` (just-in-time),
    ``history`` (message history), ``user_message`` — sized by the OpenScroll
    budget formulas for this situation, then split by ``negotiate_budget``.

    With ``B = budget``, depth ``d`` = 0.5 / 1 / 1.5 (minimal / standard / deep),
    conversation pressure ``p = min(1, conversation_tokens / 0.7B)``:

    - identity: fixed, priority 100, min 150, ideal ``min(400, 2% B)``, max 500;
    - preferences: fixed, priority 95, min 100, ideal ``min(600, 3% B)``, max 800;
    - topic: ``12% B * d * min(2, 1 + 0.3 (topics - 1)) * (1 - 0.4 p)``, min 300
      if any topic, max 25% B, priority 85 when knowledge-heavy (2+ topics or
      deep) else 70;
    - entity: ``6% B * min(2, 1 + 0.4 (entities - 1))`` capped at 400 per
      entity, min 150 if any entity, max 12% B, priority 65;
    - conversation_arc: ``150 * log2(max(1, messages) + 1) * d`` capped at
      15% B, min 200 if the conversation is active, max 20% B, priority 88 if
      active else 30;
    - retrieval: ``10% B * max(0.3, 1 - min(1, topic_bundle_tokens / 15% B)) * d``,
      min 200, max 18% B, priority 75;
    - history: all of a conversation up to 3,000 tokens, else 35% / 30% / 25% of
      B (up to 10,000 / 50,000 / beyond), x1.3 with ``prioritize_history``, x1.2
      when dialogue-heavy (more than 20 messages and ``prioritize_history``),
      never more than the conversation; min 500 if active, max 60% B, priority
      90 when dialogue-heavy else 80;
    - user_message: fixed at ``user_message_tokens``, priority 100.

    ``active_conversation`` defaults to ``message_count > 0``.

    Fixes to the published formulas (besides those of ``negotiate_budget``):
    every ideal is clamped into ``[min, max]`` and every min to ``<= max`` (the
    identity ideal ``min(400, 2% B)`` fell under its 150 floor below 7,500
    tokens; the topic ideal could pass its 25% max); the entity max is capped
    at 400 tokens per entity too (the published cap applied to the ideal only,
    so leftovers could give a situation without entities 12% of the budget);
    the history max is capped at the conversation's size and the arc gets
    nothing without messages (tokens there could never be used); a budget of 0
    gives 0 everywhere (the published pressure divided by zero).
    """
# option selection
class _SelectionInfo(TypedDict):
    value: float
    """Total value of the chosen options."""
    cost: int
    """Total cost (never above the budget)."""
    upper_bound: float
    """A proven upper bound on the optimal value (``value`` when exact)."""
    gap: float
    """``upper_bound - value`` (>= 0): how much better any plan could be."""
    lp_bound: float
    """The LP-relaxation bound (each item's upper convex hull of options)."""
    exact: bool
    """``True`` when the plan is proven optimal."""
    method: Literal["trivial", "dp", "core"]
    """How it was computed."""

@overload
def select_options(
    costs: npt.ArrayLike,
    values: npt.ArrayLike,
    budget: int,
    protected: npt.ArrayLike | None = None,
    groups: npt.ArrayLike | None = None,
    prefer_recent: bool = True,
    *,
    return_info: Literal[False] = False,
    method: Literal["auto", "dp", "core"] = "auto",
) -> npt.NDArray[np.int64]:
    """Choose one option per item (keep / summary levels / drop) maximising the
    total value with total cost ``<= budget`` tokens: a multiple-choice knapsack.
    Returns the chosen option index per item (``int64`` array).

    ``costs``: ``(n, k)`` non-negative integer token costs (int64 read in place;
    other integer dtypes converted; floats refused). ``values``: ``(n, k)``
    finite numbers. Option 0 is each item's full form: ``protected`` (``n``
    bools) items take it. ``groups`` (``n`` ints): items with the same id
    ``>= 0`` take the same option index (a tool call and its result; a group
    with a protected member takes option 0); ``-1`` = no group. Groups are
    solved as one super-item whose option ``j`` sums its members' option ``j``.

    Ties: among plans of equal value the more recent (higher-index) items get
    their lower-index, fuller options (``prefer_recent=False``: earlier items).
    Exact on the ``"dp"`` path; the core method applies it to its greedy only.

    Methods (``method="auto"`` picks):

    - ``"dp"``: the exact dynamic program over (item, tokens), after shifting
      each item's cheapest option to 0 and dividing costs by their gcd; used
      whenever its work (items x options x budget) is at most 5e7;
    - ``"core"``: the LP relaxation over each item's upper convex hull of
      options, greedy by value per token to the break item, then an exact DP
      over the core (the items with the smallest reduced cost at the break
      efficiency; the others fixed to their LP choice), grown until optimality
      is proven or a work limit is hit (after Pisinger's minimal algorithm).
      Its upper bound is ``max(value, lp_bound - smallest reduced cost outside
      the core)``, so the gap it reports is never exceeded.

    ``return_info=True`` returns ``(choices, info)`` with ``info`` a dict: ``value``, ``cost``, ``upper_bound``, ``gap``,
    ``lp_bound``, ``exact``, ``method``.

    Raises ``BudgetError`` (saying by how many tokens) when even the cheapest
    admissible plan — protected items at option 0, every other item at its
    cheapest option — exceeds the budget: an over-budget plan is never
    returned. Raises ``InvalidInputError`` naming the argument for mismatched
    shapes, wrong dtypes, NaN/inf values, negative costs or group ids below -1;
    ``InvalidTypeError`` for arguments of the wrong type.
    """
@overload
def select_options(
    costs: npt.ArrayLike,
    values: npt.ArrayLike,
    budget: int,
    protected: npt.ArrayLike | None = None,
    groups: npt.ArrayLike | None = None,
    prefer_recent: bool = True,
    *,
    return_info: Literal[True],
    method: Literal["auto", "dp", "core"] = "auto",
) -> tuple[npt.NDArray[np.int64], _SelectionInfo]: ...
# static embeddings
@final
class StaticTable:
    """The compiled half of ``ctxfold.StaticEmbedder``: a Hugging Face
    tokenizer plus a token table. A text's vector is the weighted mean of the
    rows of its token ids (no special tokens, no truncation), L2-normalised;
    a text with no tokens gets the zero vector. Batches run on all cores with
    the GIL released. BERT-style tokenizers (BertNormalizer, BertPreTokenizer,
    WordPiece) take a direct path for printable-ASCII words that gives the
    same ids as the ``tokenizers`` library; other text goes through it.

    ``tokenizer_path``: a ``tokenizer.json``; ``table``: float32 ``(rows,
    dim)`` with at least one row per token id; ``weights``: float32
    ``(rows,)``, finite and ``>= 0``. Anything else raises
    ``InvalidInputError`` / ``InvalidTypeError`` naming the argument;
    a missing tokenizer file raises ``MissingFileError``.
    """

    def __new__(
        cls,
        tokenizer_path: str | PathLike[str],
        table: npt.NDArray[np.float32],
        weights: npt.NDArray[np.float32],
    ) -> StaticTable: ...
    @property
    def dim(self) -> int:
        """Columns of the table: the embedding dimension."""
    @property
    def vocab_size(self) -> int:
        """Rows of the table."""
    @property
    def has_fast_tokenizer(self) -> bool:
        """Whether printable-ASCII text takes the direct WordPiece path."""
    def encode(self, texts: str | list[str] | tuple[str, ...], /) -> npt.NDArray[np.float32]:
        """``(dim,)`` for a str, ``(len(texts), dim)`` float32 for a list or tuple."""
    def token_ids(self, text: str, /) -> list[int]:
        """The token ids a text is averaged over."""
    def count_tokens(self, texts: str | list[str] | tuple[str, ...], /) -> npt.NDArray[np.int64]:
        """Token counts of the texts (a str counts as a list of one)."""

# entities

@final
class EntityScanner:
    """The atomic entity mentions of texts (emails, URLs, paths, versions,
    money, percentages, dates, times, code, and runs of capitalised words as
    people, organisations, places or other names), as
    ``ctxfold.text.entities.extract_mentions`` reads them.

    Built once from the package's word lists, all lower-cased: ``places``
    (the gazetteer; names may hold spaces), ``stop_words``, ``not_names``
    (capitalised chat words that name nothing), ``titles``, ``openers``
    (sentence openers before a name), ``org_words`` (words ending an
    organisation's name) and ``person_cues`` (words right before a person's
    name). Positions are ``str`` indices. A word list that is not a
    collection of non-empty ``str`` (single words, except places) raises
    ``InvalidTypeError`` or ``InvalidInputError``.
    """

    def __new__(
        cls,
        *,
        places: Iterable[str],
        stop_words: Iterable[str],
        not_names: Iterable[str],
        titles: Iterable[str],
        openers: Iterable[str],
        org_words: Iterable[str],
        person_cues: Iterable[str],
    ) -> EntityScanner: ...
    def scan(self, text: str) -> list[tuple[str, str, int, int, str, bool]]:
        """The atomic mentions of ``text`` as ``(text, type, start, end, key,
        weak)`` rows: first the non-overlapping matches of every kind but names
        in order of their start, then the names in order. ``weak`` marks a
        sentence's capitalised first word without a person cue."""
    def scan_many(self, texts: list[str] | tuple[str, ...]) -> list[list[tuple[str, str, int, int, str, bool]]]:
        """``scan`` of each text of a list (one list of rows per text)."""

def date_reference_starts(text: str) -> list[int]:
    """Every position of the lower-cased ``text`` where a relative date
    reference can start, in order: where "last", "next" or "this" occurs,
    and the starts of the word holding a head word (day, week, month, year,
    night, tomorrow) and of the four words before it (``str`` indices)."""
def literal_starts(text: str, groups: Sequence[Sequence[tuple[str, int]]]) -> list[list[int]]:
    """For each group of ``(literal, back)`` pairs, every position ``back``
    characters before an occurrence of one of its literals in ``text`` (where
    that is not before the start), in order, once each (``str`` indices)."""
