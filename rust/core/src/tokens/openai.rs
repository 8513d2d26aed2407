//! The OpenAI encodings, counted with the `tiktoken` crate (pure Rust, its
//! vocabularies compiled into the binary and unpacked in memory on first use,
//! so nothing is downloaded). It splits ASCII and CJK text with hand-written
//! scanners instead of the regex, memoises whole pieces per thread and counts
//! without building the id vector.
//!
//! `count_until` and `truncate` need to stop part-way through a text. The
//! crate counts whole texts only, so the text is cut into segments at places
//! where the pre-tokenizer always ends a piece (see `is_piece_boundary`), and
//! the segments are counted or encoded in turn: the sum of their counts is the
//! count of the whole text.

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
/// ends at byte `at`: the byte before is `\n` and the byte at `at` is
/// printable ASCII other than `/`.
///
/// Why it holds, alternative by alternative of both patterns: the
/// contractions, letter runs (whose optional first character excludes
/// `\r\n`) and digit runs never contain `\n`; the punctuation run takes `\n`
/// only in its tail `[\r\n]*` (o200k: `[\r\n/]*`), which stops at any other
/// byte; the three whitespace alternatives stop at a non-space. So no piece
/// spans `at`; and as no alternative looks behind, the pieces from `at` on
/// are those of the text that starts there. The lookahead `(?!\S)` is only
/// tried after `\s*[\r\n]+`, which already matches a run that ends in `\n`.
fn is_piece_boundary(bytes: &[u8], at: usize) -> bool {
    at > 0 && at < bytes.len() && bytes[at - 1] == b'\n' && matches!(bytes[at], 0x21..=0x7E) && bytes[at] != b'/'
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

    fn token_lens(&self) -> &[u32] {
        self.token_lens.get_or_init(|| {
            (0..self.core.vocab_size() as u32).map(|id| self.core.decode(&[id]).len() as u32).collect()
        })
    }

    /// Byte lengths of the first tokens of `text`, at least `wanted` of them when
    /// the text has that many; segments after that are not encoded.
    pub fn leading_token_lengths(&self, text: &str, wanted: usize) -> Vec<usize> {
        let lens = self.token_lens();
        let mut lengths = Vec::with_capacity(wanted.min(text.len()).saturating_add(1));
        for segment in segments(text) {
            if lengths.len() >= wanted {
                break;
            }
            lengths.extend(self.core.encode(segment).iter().map(|&t| lens[t as usize] as usize));
        }
        lengths
    }

    /// Byte lengths of every token of `text`, in order.
    pub fn token_lengths(&self, text: &str) -> Vec<usize> {
        let lens = self.token_lens();
        self.core.encode(text).iter().map(|&t| lens[t as usize] as usize).collect()
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
}
