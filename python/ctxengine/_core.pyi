"""Stubs of the compiled module `ctxengine._core` (private: import from `ctxengine`)."""

from os import PathLike

import numpy as np
import numpy.typing as npt

__version__: str

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
    def count(self, text: str | list[str] | tuple[str, ...]) -> int | npt.NDArray[np.int64]:
        """Token count of one text (an ``int``) or of each text of a list (an
        ``int64`` array, computed in parallel with the GIL released)."""
    def count_until(self, text: str, limit: int) -> int | None:
        """The exact count if it is at most ``limit``, else ``None``. Stops as
        soon as the limit is passed, so the cost follows ``limit``, not the text."""
    def truncate(self, text: str, max_tokens: int, side: str = "end") -> str:
        """The longest start (``side="end"`` cuts the end) or end (``side="start"``)
        of ``text`` cut on a token boundary and on a character boundary that
        counts at most ``max_tokens`` tokens. Returns ``text`` itself when it fits."""
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
    def decode(self, ids: list[int]) -> str:
        """Text of token ids; partial UTF-8 sequences become U+FFFD. Ids outside
        the vocabulary raise ``InvalidInputError``."""

def count_tokens(
    text: str | list[str] | tuple[str, ...], *, model: str | None = None, encoding: str | None = None
) -> int | npt.NDArray[np.int64]:
    """Exact token count of a text (``int``) or of each text of a list (``int64`` array,
    in parallel, GIL released). ``model=`` picks the model's encoding, ``encoding=``
    names one; with neither, ``o200k_base`` (every current OpenAI model)."""

def count_until(text: str, limit: int, *, model: str | None = None, encoding: str | None = None) -> int | None:
    """The exact count if it is at most ``limit``, else ``None``; the cost follows ``limit``."""

def truncate(
    text: str, max_tokens: int, side: str = "end", *, model: str | None = None, encoding: str | None = None
) -> str:
    """``text`` cut to at most ``max_tokens`` tokens on a token boundary; ``side="end"`` keeps
    the beginning, ``side="start"`` keeps the end."""

def encoding_for_model(model: str) -> str:
    """The encoding name of an OpenAI model; ``UnknownModelError`` for an unknown one."""

def known_models() -> list[str]:
    """Every model name ``encoding_for_model`` knows (prefixes end in ``*``)."""

def list_encodings() -> list[str]:
    """The built-in encodings."""

# ---- numeric core (issue 3): each area's stubs go after its marker ----
# [similarity]
# [segment]
# [decay]
# [budget]
# [knapsack]
