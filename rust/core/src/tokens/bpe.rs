//! The OpenAI encodings, counted with the `bpe-openai` crate: its vocabularies
//! are compiled into the binary and its backtracking encoder produces
//! tiktoken's tokens without tiktoken's quadratic worst case.
//!
//! Most pre-tokenized pieces of real text (words with their leading space)
//! are a single token. Like tiktoken, we look such pieces up in a hash map
//! before running BPE: it is exact (a piece that is a token encodes to that
//! token) and several times cheaper than the backtracking encoder.

use std::sync::LazyLock;

use bpe_openai::Tokenizer as Bpe;
use rustc_hash::FxHashMap;

/// One built-in encoding: the crate's tokenizer and its whole-token index.
pub struct OpenAiBpe {
    tokenizer: &'static Bpe,
    whole_tokens: FxHashMap<&'static [u8], u32>,
}

impl OpenAiBpe {
    fn new(tokenizer: &'static Bpe) -> Self {
        let ids = 0..tokenizer.bpe.num_tokens() as u32;
        let whole_tokens = ids.map(|id| (tokenizer.bpe.token_bytes(id), id)).collect();
        Self { tokenizer, whole_tokens }
    }

    fn piece_count(&self, piece: &str) -> usize {
        if self.whole_tokens.contains_key(piece.as_bytes()) {
            1
        } else {
            self.tokenizer.bpe.count(piece.as_bytes())
        }
    }

    fn piece_tokens(&self, piece: &str) -> Vec<u32> {
        match self.whole_tokens.get(piece.as_bytes()) {
            Some(&id) => vec![id],
            None => self.tokenizer.bpe.encode_via_backtracking(piece.as_bytes()),
        }
    }

    pub fn count(&self, text: &str) -> usize {
        self.tokenizer.split(text).map(|piece| self.piece_count(piece)).sum()
    }

    /// Exact count, or `None` as soon as the running count passes `limit`.
    /// Work stops at the piece that crosses the limit, so the cost follows the
    /// limit rather than the text length.
    pub fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        let mut total = 0usize;
        for piece in self.tokenizer.split(text) {
            let remaining = limit - total;
            total += if self.whole_tokens.contains_key(piece.as_bytes()) {
                (remaining >= 1).then_some(1)?
            } else {
                self.tokenizer.bpe.count_till_limit(piece.as_bytes(), remaining)?
            };
        }
        Some(total)
    }

    /// Token ids of `text` (tiktoken's `encode_ordinary`).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.tokenizer.split(text).flat_map(|piece| self.piece_tokens(piece)).collect()
    }

    /// Byte lengths of the first tokens of `text`, at least `wanted` of them when
    /// the text has that many; pieces after that are not encoded.
    pub fn leading_token_lengths(&self, text: &str, wanted: usize) -> Vec<usize> {
        let mut lengths = Vec::with_capacity(wanted.min(text.len()).saturating_add(1));
        for piece in self.tokenizer.split(text) {
            if lengths.len() >= wanted {
                break;
            }
            lengths.extend(self.piece_tokens(piece).iter().map(|&t| self.tokenizer.bpe.token_len(t)));
        }
        lengths
    }

    /// Byte lengths of every token of `text`, in order.
    pub fn token_lengths(&self, text: &str) -> Vec<usize> {
        self.leading_token_lengths(text, usize::MAX)
    }

    /// Bytes of the tokens `ids`, or the position of the first id outside the
    /// vocabulary (the crate would panic on it).
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>, usize> {
        let vocab = self.tokenizer.bpe.num_tokens();
        if let Some(pos) = ids.iter().position(|&id| id as usize >= vocab) {
            return Err(pos);
        }
        Ok(self.tokenizer.bpe.decode_tokens(ids))
    }
}

pub static CL100K_BASE: LazyLock<OpenAiBpe> = LazyLock::new(|| OpenAiBpe::new(bpe_openai::cl100k_base()));
pub static O200K_BASE: LazyLock<OpenAiBpe> = LazyLock::new(|| OpenAiBpe::new(bpe_openai::o200k_base()));
