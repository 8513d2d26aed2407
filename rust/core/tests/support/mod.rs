//! Texts shared by the exactness tests and the counting benchmark: every chat
//! message of the evaluation data (when it is present) and generated
//! adversarial text.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `../shared/data` beside the repository, or `$CTXFOLD_SHARED_DATA`; `None`
/// (with the reason printed) when it is absent.
pub fn shared_data() -> Option<PathBuf> {
    let dir = std::env::var_os("CTXFOLD_SHARED_DATA").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
    });
    if dir.join("conversations").is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: evaluation data not found at {} (set CTXFOLD_SHARED_DATA)", dir.display());
        None
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sorted_files(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| keep(p))
        .collect();
    files.sort();
    files
}

fn strings(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

/// The text of every message in LongMemEval-S, REALTALK and BEAM 100K, in
/// file order.
pub fn chat_messages(data: &Path) -> Vec<String> {
    let conversations = data.join("conversations");
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or_else(|| panic!("message without {key}: {v}")).to_owned();
    let mut messages = Vec::new();
    let is_json = |p: &Path| p.extension().is_some_and(|e| e == "json");
    for file in sorted_files(&conversations.join("longmemeval_s"), is_json) {
        let doc = read_json(&file);
        for session in strings(&doc["haystack_sessions"]) {
            messages.extend(strings(session).map(|turn| text(turn, "content")));
        }
    }
    for file in sorted_files(&conversations.join("realtalk"), is_json) {
        let doc = read_json(&file);
        let sessions = doc.as_object().unwrap().iter().filter(|(k, v)| k.starts_with("session_") && v.is_array());
        for (_, session) in sessions {
            messages.extend(strings(session).map(|turn| text(turn, "clean_text")));
        }
    }
    for chat in sorted_files(&conversations.join("beam_100k"), |p| p.is_dir()) {
        let doc = read_json(&chat.join("chat.json"));
        for batch in strings(&doc) {
            for turn in strings(&batch["turns"]) {
                messages.extend(strings(turn).map(|m| text(m, "content")));
            }
        }
    }
    messages
}

/// Deterministic xorshift, so a failure names a reproducible text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Fragments that stress the pre-tokenizers: whitespace and digit runs, the
/// places where newlines meet punctuation and slashes, contractions in any
/// case, every script class of the o200k pattern, emoji sequences, combining
/// marks, code, and characters that are valid UTF-8 but rare (noncharacters,
/// private use, the last code point, BOM, controls).
const FRAGMENTS: &[&str] = &[
    " ", "  ", "\t", "\n", "\r\n", "\n\n", " \n", "\u{a0}", "\u{3000}", "\u{2028}", "\u{85}", "\u{b}", "\u{c}",
    "0", "7", "12", "123", "1234", "٣", "Ⅻ", "½", "²",
    "a", "Z", "the", " The", "HTTP", "camelCase", "XMLHttpRequest", "ǅ", "ʰ", "ß", "İ", "ﬁ",
    "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'D", "’s", "'",
    ".", ",", "!", "?", "...", "/", "//", "\n/", ".\n/", "-", "_", "#", "*", "`", "```", "|", "~", "\\", "@",
    "(", ")", "{", "}", "[", "]", "<", ">", "=", "=>", "->", "::", ";", "\"", "$", "%", "^", "&", "+",
    "fn main() {", "    let x = y?;", "def f(a, b=3):", "\treturn {'k': [a, b]}", "<div class=\"x\">", "SELECT * FROM t;",
    "é", "e\u{301}", "a\u{300}\u{301}\u{302}", "\u{301}", "\u{5d1}\u{5bc}", "ก\u{e34}", "\u{94d}",
    "東京", "日本語", "中文字", "한국어", "カタカナ", "ひらがな", "ｱｲｳ", "ＡＢＣ", "１２３", "。", "、", "「」",
    "Привет", "ЖЖ", "Ελληνικά", "مرحبا", "שלום", "नमस्ते", "தமிழ்", "ᚠᚢᚦ", "𝔘𝔫𝔦", "𐍈",
    "😀", "👍🏽", "👨\u{200d}👩\u{200d}👧\u{200d}👦", "🇩🇪", "❤\u{fe0f}", "\u{200d}", "\u{fe0f}", "\u{1f3fd}", "🙂🙂",
    "\u{feff}", "\u{fffe}", "\u{ffff}", "\u{e000}", "\u{10ffff}", "\u{fffd}", "\u{0}", "\u{7f}", "\u{1b}[0m", "\u{1f}",
];

/// `n` generated texts: random mixtures of the fragments (up to `max_parts`
/// each), then long runs of one fragment.
pub fn adversarial_texts(n: usize, max_parts: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    let mut texts: Vec<String> = (0..n)
        .map(|_| {
            let parts = rng.below(max_parts + 1);
            (0..parts).map(|_| rng.pick(FRAGMENTS)).collect()
        })
        .collect();
    for run in [" ", "\n", " \n", "\t ", "\r\n", "1", "12345", "a", "ab ", "\n/", "é", "東", "👍🏽", "\u{301}", ".\n", "'s"] {
        for len in [1, 2, 3, 7, 64, 1000, 20_000] {
            texts.push(run.repeat(len));
            texts.push(format!("x{}y", run.repeat(len)));
            texts.push(format!("{} z", run.repeat(len)));
        }
    }
    texts
}
