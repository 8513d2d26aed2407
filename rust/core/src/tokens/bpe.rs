//! The OpenAI encodings, counted with the `bpe-openai` crate: its vocabularies
//! are compiled into the binary and its backtracking encoder produces
//! tiktoken's tokens without tiktoken's quadratic worst case.

use bpe_openai::Tokenizer as Bpe;

/// Exact count, or `None` as soon as the running count passes `limit`.
/// Work stops at the piece that crosses the limit, so the cost follows the
/// limit rather than the text length.
pub fn count_until(bpe: &Bpe, text: &str, limit: usize) -> Option<usize> {
    let mut total = 0usize;
    for piece in bpe.split(text) {
        let remaining = limit - total;
        total += bpe.bpe.count_till_limit(piece.as_bytes(), remaining)?;
    }
    Some(total)
}

/// Byte lengths of the first tokens of `text`, at least `wanted` of them when
/// the text has that many; pieces after that are not encoded.
pub fn leading_token_lengths(bpe: &Bpe, text: &str, wanted: usize) -> Vec<usize> {
    let mut lengths = Vec::with_capacity(wanted.min(text.len()).saturating_add(1));
    for piece in bpe.split(text) {
        if lengths.len() >= wanted {
            break;
        }
        let tokens = bpe.bpe.encode_via_backtracking(piece.as_bytes());
        lengths.extend(tokens.iter().map(|&t| bpe.bpe.token_len(t)));
    }
    lengths
}

/// Byte lengths of every token of `text`, in order.
pub fn token_lengths(bpe: &Bpe, text: &str) -> Vec<usize> {
    leading_token_lengths(bpe, text, usize::MAX)
}

/// Token ids of `text` (tiktoken's `encode_ordinary`).
pub fn encode(bpe: &Bpe, text: &str) -> Vec<u32> {
    bpe.encode(text)
}

/// Bytes of the tokens `ids`, or the position of the first id outside the
/// vocabulary (the crate would panic on it).
pub fn decode_bytes(bpe: &Bpe, ids: &[u32]) -> Result<Vec<u8>, usize> {
    let vocab = bpe.bpe.num_tokens();
    if let Some(pos) = ids.iter().position(|&id| id as usize >= vocab) {
        return Err(pos);
    }
    Ok(bpe.bpe.decode_tokens(ids))
}
