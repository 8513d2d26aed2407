//! Token ids of a BERT-style `tokenizer.json` (BertNormalizer, BertPreTokenizer,
//! WordPiece), equal to `tokenizers`' `encode(text, false)`, by a faster direct path.
//!
//! The `tokenizers` pipeline tracks alignments through every normalisation step
//! and allocates a string per word; a static embedder needs only the ids, and
//! tokenisation is its whole cost. Text is cut at ASCII whitespace into chunks
//! (the pipeline splits there too and no step looks across it). A chunk of
//! printable ASCII goes through a direct re-implementation: split off ASCII
//! punctuation, lowercase, WordPiece by hash lookups. Any other chunk (non-ASCII,
//! control characters, or a byte that may start an added token such as `[CLS]`)
//! goes through the `tokenizers` pipeline on its own, so the rules that are not
//! re-implemented here (accent stripping, CJK, Unicode punctuation and
//! whitespace, added tokens) stay exactly the library's.

use rustc_hash::FxHashMap;
use tokenizers::models::ModelWrapper;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{Model, Tokenizer as HfTokenizer};

use crate::{Error, Result};

/// The direct path for printable-ASCII chunks; `None` when the tokenizer is not
/// the BERT kind it re-implements.
pub struct AsciiWordPiece {
    /// Vocabulary entries as written (a word's first piece).
    words: FxHashMap<Box<[u8]>, u32>,
    /// Entries that start with the continuing-subword prefix, without it.
    pieces: FxHashMap<Box<[u8]>, u32>,
    unk: u32,
    max_chars: usize,
    lowercase: bool,
    /// Bytes that send a chunk to the library: they may start an added token.
    fallback_bytes: [bool; 128],
}

impl AsciiWordPiece {
    pub fn for_tokenizer(tokenizer: &HfTokenizer) -> Option<Self> {
        let lowercase = match tokenizer.get_normalizer() {
            Some(NormalizerWrapper::BertNormalizer(n)) => n.lowercase,
            _ => return None,
        };
        if !matches!(tokenizer.get_pre_tokenizer(), Some(PreTokenizerWrapper::BertPreTokenizer(_))) {
            return None;
        }
        let ModelWrapper::WordPiece(model) = tokenizer.get_model() else { return None };
        let vocab = model.get_vocab();
        let unk = *vocab.get(&model.unk_token)?;
        let prefix = model.continuing_subword_prefix.as_bytes();
        let mut words = FxHashMap::default();
        let mut pieces = FxHashMap::default();
        for (token, &id) in &vocab {
            let bytes = token.as_bytes();
            words.insert(bytes.into(), id);
            if let Some(rest) = bytes.strip_prefix(prefix) {
                pieces.insert(rest.into(), id);
            }
        }
        let mut fallback_bytes = [false; 128];
        for added in tokenizer.get_added_tokens_decoder().values() {
            // An added token with whitespace inside could span two chunks.
            if added.content.chars().any(char::is_whitespace) {
                return None;
            }
            if let Some(&first) = added.content.as_bytes().first() {
                if first.is_ascii() {
                    fallback_bytes[first.to_ascii_lowercase() as usize] = true;
                    fallback_bytes[first.to_ascii_uppercase() as usize] = true;
                }
            }
        }
        Some(Self { words, pieces, unk, max_chars: model.max_input_chars_per_word, lowercase, fallback_bytes })
    }

    /// Append the ids of `text` to `ids`, sending non-ASCII chunks to `tokenizer`.
    pub fn encode_into(&self, tokenizer: &HfTokenizer, text: &str, ids: &mut Vec<u32>) -> Result<()> {
        let bytes = text.as_bytes();
        let mut word = Vec::with_capacity(64);
        let mut start = 0;
        while start < bytes.len() {
            if matches!(bytes[start], b' ' | b'\t' | b'\n' | b'\r') {
                start += 1;
                continue;
            }
            let end = bytes[start..]
                .iter()
                .position(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(bytes.len(), |n| start + n);
            let chunk = &bytes[start..end];
            if chunk.iter().all(|&b| (0x20..0x7f).contains(&b) && !self.fallback_bytes[b as usize]) {
                self.encode_ascii_chunk(chunk, &mut word, ids);
            } else {
                // Chunks start and end at ASCII bytes (or the text's ends): char boundaries.
                let encoding = tokenizer
                    .encode(&text[start..end], false)
                    .map_err(|e| Error::invalid("text", format!("the tokenizer failed on this text: {e}")))?;
                ids.extend_from_slice(encoding.get_ids());
            }
            start = end;
        }
        Ok(())
    }

    /// Printable ASCII without whitespace: every punctuation byte is a word of
    /// its own (BertPreTokenizer), the runs between are words.
    fn encode_ascii_chunk(&self, chunk: &[u8], word: &mut Vec<u8>, ids: &mut Vec<u32>) {
        word.clear();
        for &b in chunk {
            if b.is_ascii_punctuation() {
                if !word.is_empty() {
                    self.encode_word(word, ids);
                    word.clear();
                }
                self.encode_word(&[b], ids);
            } else {
                word.push(if self.lowercase { b.to_ascii_lowercase() } else { b });
            }
        }
        if !word.is_empty() {
            self.encode_word(word, ids);
        }
    }

    /// WordPiece: greedy longest match from the left, the whole word becoming
    /// the unknown token when a part matches nothing (as `tokenizers` does).
    fn encode_word(&self, word: &[u8], ids: &mut Vec<u32>) {
        if word.len() > self.max_chars {
            ids.push(self.unk);
            return;
        }
        if let Some(&id) = self.words.get(word) {
            ids.push(id);
            return;
        }
        let mark = ids.len();
        let mut start = 0;
        while start < word.len() {
            let table = if start == 0 { &self.words } else { &self.pieces };
            let found = (start + 1..=word.len()).rev().find_map(|end| table.get(&word[start..end]).map(|&id| (id, end)));
            match found {
                Some((id, end)) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(mark);
                    ids.push(self.unk);
                    return;
                }
            }
        }
    }
}
