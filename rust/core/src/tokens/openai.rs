//! The OpenAI encodings, counted with the `tiktoken` crate (pure Rust, its
//! vocabularies compiled into the binary and unpacked in memory on first use,
//! so nothing is downloaded). It splits ASCII and CJK text with hand-written
//! scanners instead of the regex, memoises whole pieces per thread and counts
//! without building the id vector.
//!
//! `count_until` and `truncate` need to stop part-way through a text. For
//! `count_until` the text is cut into segments at places where the
//! pre-tokenizer always ends a piece (see `is_piece_boundary`), counted in
//! turn: the sum of their counts is the count of the whole text, and a short
//! text is counted by the crate's own loop. `truncate` encodes only a prefix
//! or a suffix that ends or starts at such a boundary, long enough to hold
//! the tokens it keeps.

use std::sync::{LazyLock, OnceLock};

use tiktoken::CoreBpe;

/// Segments are cut no shorter than this, so that the per-call cost of the
/// crate stays small next to the work on the segment.
const SEGMENT_BYTES: usize = 4096;

/// One built-in encoding.
pub struct OpenAiBpe {
    core: CoreBpe,
    /// Byte length of each token, built on the first `truncate`.
    token_lens: OnceLock<Vec<u32>>,
}

/// True when every piece of the cl100k_base and o200k_base pre-tokenizers
/// ends at byte `at`: either the byte before is `\n` and the byte at `at` is
/// printable ASCII other than `/`, or the byte before is an ASCII letter and
/// the byte at `at` a space.
///
/// Why it holds, alternative by alternative of both patterns. After `\n`:
/// the contractions, letter runs (whose optional first character excludes
/// `\r\n`) and digit runs never contain `\n`; the punctuation run takes `\n`
/// only in its tail `[\r\n]*` (o200k: `[\r\n/]*`), which stops at any other
/// byte; the three whitespace alternatives stop at a non-space. The
/// lookahead `(?!\S)` is only tried after `\s*[\r\n]+`, which already
/// matches a run that ends in `\n`. Between a letter and a space: the only
/// alternatives that take a letter (letter runs, with o200k's contraction
/// tails, and the contractions) end at a letter, and no alternative that
/// takes a space takes a letter before it. So no piece spans `at`; and as no
/// alternative looks behind, the pieces from `at` on are those of the text
/// that starts there.
fn is_piece_boundary(bytes: &[u8], at: usize) -> bool {
    if at == 0 || at >= bytes.len() {
        return false;
    }
    let (before, after) = (bytes[at - 1], bytes[at]);
    (before == b'\n' && matches!(after, 0x21..=0x7E) && after != b'/') || (before.is_ascii_alphabetic() && after == b' ')
}

/// `text` cut into consecutive segments of at least `SEGMENT_BYTES` (the last
/// may be shorter) at piece boundaries; a text with no boundary is one segment.
fn segments(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let mut end = bytes.len();
        let mut at = start + SEGMENT_BYTES;
        while at < bytes.len() {
            match bytes[at..].iter().position(|&b| b == b'\n') {
                Some(offset) if is_piece_boundary(bytes, at + offset + 1) => {
                    end = at + offset + 1;
                    break;
                }
                Some(offset) => at += offset + 1,
                None => break,
            }
        }
        // The cut is after an ASCII `\n`, so it is on a character boundary.
        let segment = &text[start..end];
        start = end;
        Some(segment)
    })
}

impl OpenAiBpe {
    fn new(core: CoreBpe) -> Self {
        Self { core, token_lens: OnceLock::new() }
    }

    pub fn count(&self, text: &str) -> usize {
        self.core.count(text)
    }

    /// Exact count, or `None` once the running count passes `limit`: the cost
    /// follows the limit (one segment past it at most), not the text length.
    pub fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        let mut total = 0usize;
        for segment in segments(text) {
            total += self.core.count(segment);
            if total > limit {
                return None;
            }
        }
        Some(total)
    }

    /// Token ids of `text` (tiktoken's `encode_ordinary`).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.core.encode(text)
    }

    /// Byte length of each token, by id.
    pub fn token_lens(&self) -> &[u32] {
        self.token_lens.get_or_init(|| {
            (0..self.core.vocab_size() as u32).map(|id| self.core.decode(&[id]).len() as u32).collect()
        })
    }

    /// The first ids of `text`, at least `wanted` of them when the text has
    /// that many (fewer only when they are all of its ids): the ids of a
    /// prefix that ends at a piece boundary, which are the first ids of the
    /// whole text's.
    pub fn encode_leading(&self, text: &str, wanted: usize) -> Vec<u32> {
        let bytes = text.as_bytes();
        // Tokens average about four bytes: stop twice that far in, and go on further while short.
        let mut reach = wanted.saturating_mul(8).max(64);
        while reach < bytes.len() {
            let mut at = reach;
            while at < bytes.len() && !is_piece_boundary(bytes, at) {
                at += 1;
            }
            if at >= bytes.len() {
                break;
            }
            // `at` is at an ASCII byte, so on a character boundary.
            let ids = self.core.encode(&text[..at]);
            if ids.len() >= wanted {
                return ids;
            }
            reach = at.saturating_mul(2);
        }
        self.core.encode(text)
    }

    /// The last ids of `text`, at least `wanted` of them when the text has
    /// that many (fewer only when they are all of its ids): the ids of a
    /// suffix that starts at a piece boundary, which are the last ids of the
    /// whole text's.
    pub fn encode_trailing(&self, text: &str, wanted: usize) -> Vec<u32> {
        let bytes = text.as_bytes();
        // Tokens average about four bytes: start twice that far from the end, and go back further while short.
        let mut reach = wanted.saturating_mul(8).max(64);
        while reach < bytes.len() {
            let mut at = bytes.len() - reach;
            while at > 0 && !is_piece_boundary(bytes, at) {
                at -= 1;
            }
            if at == 0 {
                break;
            }
            // `at` is before an ASCII byte, so on a character boundary.
            let ids = self.core.encode(&text[at..]);
            if ids.len() >= wanted {
                return ids;
            }
            reach = (bytes.len() - at).saturating_mul(2);
        }
        self.core.encode(text)
    }

    /// Bytes of the tokens `ids`, or the position of the first id outside the
    /// vocabulary (the crate would skip it silently).
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>, usize> {
        let vocab = self.core.vocab_size();
        if let Some(pos) = ids.iter().position(|&id| id as usize >= vocab) {
            return Err(pos);
        }
        Ok(self.core.decode(ids))
    }
}

pub static CL100K_BASE: LazyLock<OpenAiBpe> = LazyLock::new(|| OpenAiBpe::new(tiktoken::encoding::cl100k_base()));
pub static O200K_BASE: LazyLock<OpenAiBpe> = LazyLock::new(|| OpenAiBpe::new(tiktoken::encoding::o200k_base()));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_text_and_cut_only_at_boundaries() {
        let line = "word and more words\n";
        let text = format!("{}/path\n  indented\n{}", line.repeat(400), "x".repeat(9000));
        let parts: Vec<&str> = segments(&text).collect();
        assert!(parts.len() > 1);
        assert_eq!(parts.concat(), text);
        let mut at = 0;
        for part in &parts[..parts.len() - 1] {
            at += part.len();
            assert!(part.len() >= SEGMENT_BYTES && is_piece_boundary(text.as_bytes(), at));
        }
        assert_eq!(segments("").count(), 0);
        assert_eq!(segments(&"y".repeat(20_000)).count(), 1);
    }

    /// Texts where letters meet spaces, newlines, contractions, marks, digits and other scripts.
    const TRICKY: &[&str] = &[
        "It's what they'd said: DON'T stop, we'LL see.\nNext line  with  double  spaces \n\n /path x",
        "camelCase HTTPServer fooBar_baz naïve café e\u{301} x \u{4e2d}\u{6587} text 12345 abc 1a b2 c",
        "a b c d e f g h i j k l m n o p q r s t u v w x y z   trailing   \t\ttabs\r\nwindows line",
        "emoji \u{1F600} then words, 'quoted' words and ’curly’ ones; x's y'S z're",
    ];

    #[test]
    fn every_boundary_splits_the_encoding() {
        for enc in [&*CL100K_BASE, &*O200K_BASE] {
            for text in TRICKY {
                let whole = enc.encode(text);
                let bytes = text.as_bytes();
                for at in (1..bytes.len()).filter(|&at| is_piece_boundary(bytes, at)) {
                    let mut parts = enc.encode(&text[..at]);
                    parts.extend(enc.encode(&text[at..]));
                    assert_eq!(parts, whole, "boundary at {at} in {text:?}");
                }
            }
        }
    }

    #[test]
    fn leading_and_trailing_ids_are_those_of_the_whole_text() {
        for enc in [&*CL100K_BASE, &*O200K_BASE] {
            for text in TRICKY.iter().map(|t| t.repeat(40)).chain(TRICKY.iter().map(|t| t.to_string())) {
                let whole = enc.encode(&text);
                for wanted in [0, 1, 2, 7, 50, 101, 400, 5000] {
                    let tail = enc.encode_trailing(&text, wanted);
                    assert!(whole.ends_with(&tail), "not a suffix: wanted {wanted} of {text:?}");
                    assert!(tail.len() >= wanted.min(whole.len()));
                    let head = enc.encode_leading(&text, wanted);
                    assert!(whole.starts_with(&head) && head.len() >= wanted.min(whole.len()));
                }
            }
        }
    }
}
