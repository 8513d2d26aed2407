//! Static text embeddings: the fast path next to the ONNX sentence encoder.
//!
//! A text's vector is the weighted mean of the table rows of its tokens, scaled
//! to unit length: `normalize(sum_t w[t] * table[t] / sum_t w[t])`. The table
//! (one row per vocabulary id) and the weights are distilled from the encoder
//! offline (scripts/build_static_table.py), so embedding costs one tokenisation
//! and one row lookup per token, with no model run.
//!
//! Tokens are those of the model's Hugging Face `tokenizer.json` without special
//! tokens (no `[CLS]`/`[SEP]`) and without truncation: a long text is embedded
//! whole. A text with no tokens (empty, or only whitespace) gets the zero
//! vector, which has cosine 0 with everything.

mod wordpiece;

use std::path::Path;

use ndarray::{Array2, ArrayView1, ArrayView2};
use rayon::prelude::*;
use tokenizers::Tokenizer as HfTokenizer;

use crate::tokens::TokenCounter;
use crate::{Error, Result};
use wordpiece::AsciiWordPiece;

/// Token rows summed in float32 per block of this many tokens, the blocks in
/// float64: float32 speed, and long texts do not pile up float32 rounding.
const BLOCK: usize = 64;

pub struct StaticEmbedder {
    tokenizer: HfTokenizer,
    fast: Option<AsciiWordPiece>,
    /// Row-major `(vocab, dim)`.
    table: Vec<f32>,
    weights: Vec<f32>,
    dim: usize,
}

impl StaticEmbedder {
    /// An embedder from the `tokenizer.json` at `tokenizer_path`, a `(vocab, dim)`
    /// table and one weight per vocabulary id.
    pub fn from_file(tokenizer_path: &Path, table: ArrayView2<f32>, weights: ArrayView1<f32>) -> Result<Self> {
        match TokenCounter::from_file(tokenizer_path)? {
            TokenCounter::HuggingFace { tokenizer, .. } => Self::new(*tokenizer, table, weights),
            TokenCounter::OpenAi(_) => Err(Error::invalid("tokenizer", "expected a Hugging Face tokenizer.json")),
        }
    }

    /// An embedder from a loaded tokenizer (truncation and padding should be off).
    pub fn new(tokenizer: HfTokenizer, table: ArrayView2<f32>, weights: ArrayView1<f32>) -> Result<Self> {
        let (rows, dim) = table.dim();
        if rows == 0 || dim == 0 {
            return Err(Error::invalid("table", format!("must have at least one row and one column, got shape ({rows}, {dim})")));
        }
        let vocab = tokenizer.get_vocab_size(true);
        if rows < vocab {
            return Err(Error::invalid(
                "table",
                format!("has {rows} rows but the tokenizer has {vocab} token ids; the table must have one row per token id (build it for this tokenizer)"),
            ));
        }
        if weights.len() != rows {
            return Err(Error::invalid("weights", format!("has {} values but the table has {rows} rows; pass one weight per row", weights.len())));
        }
        if let Some((i, v)) = table.indexed_iter().find(|(_, v)| !v.is_finite()) {
            return Err(Error::invalid("table", format!("table[{}, {}] = {v} is not finite", i.0, i.1)));
        }
        if let Some((i, v)) = weights.iter().enumerate().find(|(_, v)| !v.is_finite() || **v < 0.0) {
            return Err(Error::invalid("weights", format!("weights[{i}] = {v}; weights must be finite and >= 0")));
        }
        let fast = AsciiWordPiece::for_tokenizer(&tokenizer);
        Ok(Self { tokenizer, fast, table: table.iter().copied().collect(), weights: weights.to_vec(), dim })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows of the table (at least the tokenizer's vocabulary size).
    pub fn vocab_size(&self) -> usize {
        self.weights.len()
    }

    /// Whether printable-ASCII text takes the direct WordPiece path.
    pub fn has_fast_tokenizer(&self) -> bool {
        self.fast.is_some()
    }

    /// The token ids the embedding averages: the tokenizer's ids for `text`
    /// without special tokens.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        self.token_ids_into(text, &mut ids)?;
        Ok(ids)
    }

    /// The same ids from the `tokenizers` pipeline alone (the reference the
    /// direct path is tested against).
    pub fn reference_token_ids(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| Error::invalid("text", format!("the tokenizer failed on this text: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    fn token_ids_into(&self, text: &str, ids: &mut Vec<u32>) -> Result<()> {
        ids.clear();
        match &self.fast {
            Some(fast) => fast.encode_into(&self.tokenizer, text, ids),
            None => {
                ids.extend(self.reference_token_ids(text)?);
                Ok(())
            }
        }
    }

    /// The unit-norm weighted mean of the rows of `ids` into `out` (`dim`
    /// values); zeros when there are no ids or their weights are all zero.
    pub fn pool(&self, ids: &[u32], out: &mut [f32]) -> Result<()> {
        if out.len() != self.dim {
            return Err(Error::invalid("out", format!("has {} values, expected dim = {}", out.len(), self.dim)));
        }
        if let Some(pos) = ids.iter().position(|&id| id as usize >= self.weights.len()) {
            return Err(Error::invalid("ids", format!("ids[{pos}] = {} is outside the table of {} rows", ids[pos], self.weights.len())));
        }
        let dim = self.dim;
        let mut total = vec![0.0f64; dim];
        let mut block = vec![0.0f32; dim];
        for chunk in ids.chunks(BLOCK) {
            block.fill(0.0);
            for &id in chunk {
                let id = id as usize;
                let w = self.weights[id];
                let row = &self.table[id * dim..(id + 1) * dim];
                for (b, &x) in block.iter_mut().zip(row) {
                    *b += w * x;
                }
            }
            for (t, &b) in total.iter_mut().zip(&block) {
                *t += f64::from(b);
            }
        }
        // The division by the weight sum is a no-op after normalisation.
        let norm = total.iter().map(|v| v * v).sum::<f64>().sqrt();
        let scale = if norm > 0.0 && norm.is_finite() { 1.0 / norm } else { 0.0 };
        for (o, t) in out.iter_mut().zip(&total) {
            *o = (t * scale) as f32;
        }
        Ok(())
    }

    /// The embedding of one text.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>> {
        let ids = self.token_ids(text)?;
        let mut out = vec![0.0; self.dim];
        self.pool(&ids, &mut out)?;
        Ok(out)
    }

    /// Embeddings of `texts`, one row each, spread over rayon's threads. An
    /// error names the text's index as `texts[i]`.
    pub fn embed_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Array2<f32>> {
        let dim = self.dim;
        let mut out = vec![0.0f32; texts.len() * dim];
        out.par_chunks_mut(dim).zip(texts.par_iter()).enumerate().with_max_len(1).try_for_each_init(
            || Vec::with_capacity(1024),
            |ids, (i, (row, text))| {
                self.token_ids_into(text.as_ref(), ids).map_err(|e| rename(e, &format!("texts[{i}]")))?;
                self.pool(ids, row)
            },
        )?;
        Array2::from_shape_vec((texts.len(), dim), out).map_err(|e| Error::invalid("texts", e.to_string()))
    }

    /// Token counts of `texts` as this embedder sees them (for throughput figures).
    pub fn count_tokens_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<usize>> {
        texts
            .par_iter()
            .enumerate()
            .map_init(Vec::new, |ids, (i, t)| {
                self.token_ids_into(t.as_ref(), ids).map_err(|e| rename(e, &format!("texts[{i}]")))?;
                Ok(ids.len())
            })
            .collect()
    }
}

/// The same error with the argument renamed (a text inside a batch).
fn rename(error: Error, argument: &str) -> Error {
    match error {
        Error::InvalidInput { message, .. } => Error::InvalidInput { argument: argument.to_owned(), message },
        other => other,
    }
}
