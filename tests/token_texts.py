"""Generated adversarial text for the token-count exactness checks (the same
fragments as rust/core/tests/support/mod.rs): whitespace and digit runs,
newlines against punctuation and slashes, contractions in any case, every
script class of the o200k pattern, emoji sequences, combining marks, code,
and characters that are valid UTF-8 but rare."""

from __future__ import annotations

import random

FRAGMENTS = [
    " ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b", "\u000c",
    "0", "7", "12", "123", "1234", "٣", "Ⅻ", "½", "²",
    "a", "Z", "the", " The", "HTTP", "camelCase", "XMLHttpRequest", "ǅ", "ʰ", "ß", "İ", "ﬁ",
    "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'D", "’s", "'",
    ".", ",", "!", "?", "...", "/", "//", "\n/", ".\n/", "-", "_", "#", "*", "`", "```", "|", "~", "\\", "@",
    "(", ")", "{", "}", "[", "]", "<", ">", "=", "=>", "->", "::", ";", '"', "$", "%", "^", "&", "+",
    "fn main() {", "    let x = y?;", "def f(a, b=3):", "\treturn {'k': [a, b]}", '<div class="x">', "SELECT * FROM t;",
    "é", "e\u0301", "a\u0300\u0301\u0302", "\u0301", "\u05d1\u05bc", "ก\u0e34", "\u094d",
    "東京", "日本語", "中文字", "한국어", "カタカナ", "ひらがな", "ｱｲｳ", "ＡＢＣ", "１２３", "。", "、", "「」",
    "Привет", "ЖЖ", "Ελληνικά", "مرحبا", "שלום", "नमस्ते", "தமிழ்", "ᚠᚢᚦ", "𝔘𝔫𝔦", "𐍈",
    "😀", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🇩🇪", "❤\ufe0f", "\u200d", "\ufe0f", "\U0001f3fd", "🙂🙂",
    "\ufeff", "\ufffe", "\uffff", "\ue000", "\U0010ffff", "\ufffd", "\u0000", "\u007f", "\u001b[0m", "\u001f",
]

RUNS = [" ", "\n", " \n", "\t ", "\r\n", "1", "12345", "a", "ab ", "\n/", "é", "東", "👍🏽", "\u0301", ".\n", "'s"]


def adversarial_texts(n: int, max_parts: int, seed: int, run_lengths=(1, 2, 3, 7, 64, 1000, 20_000)) -> list[str]:
    """`n` random mixtures of the fragments (up to `max_parts` each), then long
    runs of single fragments, alone and between other characters."""
    rng = random.Random(seed)
    texts = ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, max_parts))) for _ in range(n)]
    for run in RUNS:
        for length in run_lengths:
            texts += [run * length, f"x{run * length}y", f"{run * length} z"]
    return texts


def documents(texts: list[str], size: int) -> list[str]:
    """The texts joined with newlines into documents of about `size`
    characters, long enough for the counter to cut them into segments."""
    docs: list[list[str]] = [[]]
    length = 0
    for text in texts:
        if length > size:
            docs.append([])
            length = 0
        docs[-1].append(text + "\n")
        length += len(text) + 1
    return ["".join(doc) for doc in docs]
