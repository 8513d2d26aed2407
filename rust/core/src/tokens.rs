//! Exact token counting: the OpenAI encodings built into the binary, or any
//! Hugging Face `tokenizer.json`. Counts equal tiktoken's `encode_ordinary`
//! (special-token text such as `<|endoftext|>` is counted as plain text).

mod huggingface;
mod models;
mod openai;

use std::path::Path;

use rayon::prelude::*;
use tokenizers::Tokenizer as HfTokenizer;

pub use models::{encoding_for_model, known_models};

use crate::{Error, Result};

/// The encodings whose vocabularies are compiled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Cl100kBase,
    O200kBase,
}

impl Encoding {
    pub const ALL: [Encoding; 2] = [Encoding::Cl100kBase, Encoding::O200kBase];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name).ok_or_else(|| Error::UnknownEncoding {
            name: name.to_owned(),
            known: Self::ALL.iter().map(|e| e.name().to_owned()).collect(),
        })
    }

    fn bpe(self) -> &'static openai::OpenAiBpe {
        match self {
            Encoding::Cl100kBase => &openai::CL100K_BASE,
            Encoding::O200kBase => &openai::O200K_BASE,
        }
    }
}

/// Which end of the text `truncate` cuts away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Keep the beginning, cut the end.
    End,
    /// Keep the end, cut the beginning.
    Start,
}

impl Side {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "end" => Ok(Side::End),
            "start" => Ok(Side::Start),
            other => Err(Error::invalid("side", format!("must be \"end\" or \"start\", got {other:?}"))),
        }
    }

    /// The part of `text` kept when cutting at byte offset `cut`.
    fn kept(self, text: &str, cut: usize) -> &str {
        match self {
            Side::End => &text[..cut],
            Side::Start => &text[cut..],
        }
    }
}

/// A tokenizer used for counting: one of the built-in encodings or a loaded
/// Hugging Face tokenizer.
pub enum TokenCounter {
    OpenAi(Encoding),
    HuggingFace { name: String, tokenizer: Box<HfTokenizer> },
}

impl TokenCounter {
    pub fn for_encoding(name: &str) -> Result<Self> {
        Encoding::from_name(name).map(TokenCounter::OpenAi)
    }

    pub fn for_model(model: &str) -> Result<Self> {
        encoding_for_model(model).map(TokenCounter::OpenAi)
    }

    /// The counter named by a `model=` / `encoding=` pair of arguments.
    /// Neither means `o200k_base` (every current OpenAI model); both must agree.
    pub fn resolve(model: Option<&str>, encoding: Option<&str>) -> Result<Encoding> {
        match (model, encoding) {
            (None, None) => Ok(Encoding::O200kBase),
            (Some(m), None) => encoding_for_model(m),
            (None, Some(e)) => Encoding::from_name(e),
            (Some(m), Some(e)) => {
                let (by_model, named) = (encoding_for_model(m)?, Encoding::from_name(e)?);
                if by_model != named {
                    return Err(Error::invalid(
                        "encoding",
                        format!("model {m:?} uses {} but encoding={e:?} was passed; pass only one of them", by_model.name()),
                    ));
                }
                Ok(named)
            }
        }
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let tokenizer = Box::new(huggingface::load(path)?);
        Ok(TokenCounter::HuggingFace { name: path.display().to_string(), tokenizer })
    }

    /// The encoding name, or the file a Hugging Face tokenizer came from.
    pub fn name(&self) -> &str {
        match self {
            TokenCounter::OpenAi(enc) => enc.name(),
            TokenCounter::HuggingFace { name, .. } => name,
        }
    }

    pub fn count(&self, text: &str) -> Result<usize> {
        match self {
            TokenCounter::OpenAi(enc) => Ok(enc.bpe().count(text)),
            TokenCounter::HuggingFace { tokenizer, .. } => huggingface::count(tokenizer, text),
        }
    }

    /// Counts of many texts, spread over rayon's threads.
    pub fn count_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<Vec<usize>> {
        texts.par_iter().with_min_len(16).map(|t| self.count(t.as_ref())).collect()
    }

    /// The exact count when it is at most `limit`, else `None`. For the
    /// built-in encodings the work stops once the limit is passed.
    pub fn count_until(&self, text: &str, limit: usize) -> Result<Option<usize>> {
        match self {
            TokenCounter::OpenAi(enc) => Ok(enc.bpe().count_until(text, limit)),
            TokenCounter::HuggingFace { .. } => Ok(Some(self.count(text)?).filter(|&n| n <= limit)),
        }
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match self {
            TokenCounter::OpenAi(enc) => Ok(enc.bpe().encode(text)),
            TokenCounter::HuggingFace { tokenizer, .. } => huggingface::ids(tokenizer, text),
        }
    }

    /// Text of `ids`; bytes that are not valid UTF-8 on their own (a token
    /// holding half a character) become U+FFFD, as in tiktoken's `decode`.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match self {
            TokenCounter::OpenAi(enc) => enc.bpe().decode_bytes(ids)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .map_err(|pos| {
                    Error::invalid("ids", format!("ids[{pos}] = {} is not a token of {}", ids[pos], enc.name()))
                }),
            TokenCounter::HuggingFace { tokenizer, .. } => huggingface::decode(tokenizer, ids),
        }
    }

    /// The longest part of `text` (its start for `Side::End`, its end for
    /// `Side::Start`) that cuts on a token boundary, is valid UTF-8 and counts
    /// at most `max_tokens` when counted again on its own.
    pub fn truncate<'a>(&self, text: &'a str, max_tokens: usize, side: Side) -> Result<&'a str> {
        let Some(cuts) = self.cut_points(text, max_tokens, side)? else {
            return Ok(text);
        };
        for &cut in cuts.iter().rev() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let kept = side.kept(text, cut);
            if self.count_until(kept, max_tokens)?.is_some() {
                return Ok(kept);
            }
        }
        Ok(side.kept(text, cuts[0]))
    }

    /// `cuts[m]` is the byte offset that keeps `m` tokens, for `m` in
    /// `0..=max_tokens`; `None` when the whole text has at most `max_tokens`.
    fn cut_points(&self, text: &str, max_tokens: usize, side: Side) -> Result<Option<Vec<usize>>> {
        let enc = match self {
            TokenCounter::OpenAi(enc) => enc.bpe(),
            TokenCounter::HuggingFace { tokenizer, .. } => {
                let spans = huggingface::token_spans(tokenizer, text)?;
                if spans.len() <= max_tokens {
                    return Ok(None);
                }
                return Ok(Some(match side {
                    Side::End => std::iter::once(0).chain(spans[..max_tokens].iter().map(|s| s.1)).collect(),
                    Side::Start => std::iter::once(text.len())
                        .chain(spans.iter().rev().take(max_tokens).map(|s| s.0))
                        .collect(),
                }));
            }
        };
        // Ids, not spans: a text that fits is known before any token is measured.
        let ids = match side {
            Side::End => enc.encode_leading(text, max_tokens.saturating_add(1)),
            Side::Start => enc.encode_trailing(text, max_tokens.saturating_add(1)),
        };
        if ids.len() <= max_tokens {
            return Ok(None);
        }
        let lens = enc.token_lens();
        let mut cuts = Vec::with_capacity(max_tokens + 1);
        match side {
            Side::End => {
                let mut at = 0;
                cuts.push(at);
                for &id in &ids[..max_tokens] {
                    at += lens[id as usize] as usize;
                    cuts.push(at);
                }
            }
            Side::Start => {
                let mut at = text.len();
                cuts.push(at);
                for &id in ids.iter().rev().take(max_tokens) {
                    at -= lens[id as usize] as usize;
                    cuts.push(at);
                }
            }
        }
        Ok(Some(cuts))
    }
}
