//! Which built-in encoding each OpenAI model uses (the table of tiktoken's
//! `model.py`). Exact names first, then dated or fine-tuned variants by prefix.

use super::Encoding::{self, Cl100kBase, O200kBase};
use crate::{Error, Result};

const EXACT: &[(&str, Encoding)] = &[
    ("gpt-5", O200kBase),
    ("gpt-5-mini", O200kBase),
    ("gpt-5-nano", O200kBase),
    ("gpt-4.1", O200kBase),
    ("gpt-4.1-mini", O200kBase),
    ("gpt-4.1-nano", O200kBase),
    ("gpt-4.5-preview", O200kBase),
    ("gpt-4o", O200kBase),
    ("gpt-4o-mini", O200kBase),
    ("chatgpt-4o-latest", O200kBase),
    ("o1", O200kBase),
    ("o1-mini", O200kBase),
    ("o1-preview", O200kBase),
    ("o3", O200kBase),
    ("o3-mini", O200kBase),
    ("o4-mini", O200kBase),
    ("gpt-4", Cl100kBase),
    ("gpt-4-turbo", Cl100kBase),
    ("gpt-4-32k", Cl100kBase),
    ("gpt-3.5-turbo", Cl100kBase),
    ("gpt-3.5-turbo-16k", Cl100kBase),
    ("gpt-35-turbo", Cl100kBase),
    ("text-embedding-ada-002", Cl100kBase),
    ("text-embedding-3-small", Cl100kBase),
    ("text-embedding-3-large", Cl100kBase),
];

/// Longer prefixes come first so that `ft:gpt-4o` is not taken for `ft:gpt-4`.
const PREFIXES: &[(&str, Encoding)] = &[
    ("ft:gpt-4o-mini", O200kBase),
    ("ft:gpt-4.1", O200kBase),
    ("ft:gpt-4o", O200kBase),
    ("ft:gpt-3.5-turbo", Cl100kBase),
    ("ft:gpt-4", Cl100kBase),
    ("chatgpt-4o-", O200kBase),
    ("gpt-4.1-", O200kBase),
    ("gpt-4.5-", O200kBase),
    ("gpt-4o-", O200kBase),
    ("gpt-5-", O200kBase),
    ("o1-", O200kBase),
    ("o3-", O200kBase),
    ("o4-mini-", O200kBase),
    ("gpt-3.5-turbo-", Cl100kBase),
    ("gpt-35-turbo-", Cl100kBase),
    ("gpt-4-", Cl100kBase),
];

/// The encoding of `model`, or `UnknownModel` listing every known name.
pub fn encoding_for_model(model: &str) -> Result<Encoding> {
    if let Some((_, enc)) = EXACT.iter().find(|(name, _)| *name == model) {
        return Ok(*enc);
    }
    if let Some((_, enc)) = PREFIXES.iter().find(|(prefix, _)| model.starts_with(prefix)) {
        return Ok(*enc);
    }
    Err(Error::UnknownModel { name: model.to_owned(), known: known_models() })
}

/// Every exact model name, then the prefixes written as `prefix*`.
pub fn known_models() -> Vec<String> {
    EXACT
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .chain(PREFIXES.iter().map(|(prefix, _)| format!("{prefix}*")))
        .collect()
}
