"""ctxengine: fit an LLM agent's context into a token budget.

Exact token counting (the OpenAI encodings compiled in, any Hugging Face
tokenizer.json) and the numeric primitives run in the Rust core
(`ctxengine._core`, private); this package is the public API.
"""

from ctxengine._core import (
    Tokenizer,
    __version__,
    count_tokens,
    count_until,
    encoding_for_model,
    known_models,
    list_encodings,
    truncate,
)
# numeric core (issue 3): one import line per area, after its marker
# [similarity]
# [segment]
# [decay]
# [budget]
# [knapsack]
from ctxengine.errors import (
    BudgetError,
    CtxEngineError,
    InvalidInputError,
    InvalidTypeError,
    MissingFileError,
    UnknownEncodingError,
    UnknownModelError,
)
from ctxengine.tokens import approximate_tokens, count_messages, get_tokenizer

__all__ = [
    "__version__",
    # token counting
    "Tokenizer",
    "count_tokens",
    "count_until",
    "truncate",
    "count_messages",
    "approximate_tokens",
    "get_tokenizer",
    "encoding_for_model",
    "known_models",
    "list_encodings",
    # numeric core: names after each area's marker
    # [similarity]
    # [segment]
    # [decay]
    # [budget]
    # [knapsack]
    # errors
    "CtxEngineError",
    "InvalidInputError",
    "InvalidTypeError",
    "UnknownModelError",
    "UnknownEncodingError",
    "MissingFileError",
    "BudgetError",
]
