//! Any Hugging Face `tokenizer.json` (Llama, Qwen, Mistral, MiniLM...) through
//! the `tokenizers` crate. Counts exclude special tokens such as `[CLS]` or
//! `<s>`: they are the length of the text itself, not of a model input.

use std::path::Path;

use tokenizers::Tokenizer as HfTokenizer;

use crate::{Error, Result};

/// Load `path`, switching off any truncation or padding the file configures:
/// a counter that silently stopped at the model's 512 tokens would lie.
pub fn load(path: &Path) -> Result<HfTokenizer> {
    let shown = path.display().to_string();
    if !path.is_file() {
        return Err(Error::FileNotFound { argument: "path".into(), path: shown });
    }
    let mut loaded = HfTokenizer::from_file(path).map_err(|e| {
        Error::invalid(
            "path",
            format!("{shown:?} is not a valid Hugging Face tokenizer.json ({e}); pass the tokenizer.json saved by `tokenizer.save(...)`"),
        )
    })?;
    loaded.with_truncation(None).map_err(|e| Error::invalid("path", e.to_string()))?.with_padding(None);
    Ok(loaded)
}

fn encode(tokenizer: &HfTokenizer, text: &str) -> Result<tokenizers::Encoding> {
    tokenizer
        .encode(text, false)
        .map_err(|e| Error::invalid("text", format!("the tokenizer failed on this text: {e}")))
}

pub fn count(tokenizer: &HfTokenizer, text: &str) -> Result<usize> {
    Ok(encode(tokenizer, text)?.get_ids().len())
}

pub fn ids(tokenizer: &HfTokenizer, text: &str) -> Result<Vec<u32>> {
    Ok(encode(tokenizer, text)?.get_ids().to_vec())
}

/// Byte ranges of the tokens in `text`, from the tokenizer's own offsets.
pub fn token_spans(tokenizer: &HfTokenizer, text: &str) -> Result<Vec<(usize, usize)>> {
    Ok(encode(tokenizer, text)?.get_offsets().to_vec())
}

pub fn decode(tokenizer: &HfTokenizer, ids: &[u32]) -> Result<String> {
    let vocab = tokenizer.get_vocab_size(true);
    if let Some(pos) = ids.iter().position(|&id| id as usize >= vocab) {
        return Err(Error::invalid("ids", format!("ids[{pos}] = {} is not in the vocabulary of {vocab} tokens", ids[pos])));
    }
    tokenizer
        .decode(ids, false)
        .map_err(|e| Error::invalid("ids", format!("cannot decode: {e}")))
}
