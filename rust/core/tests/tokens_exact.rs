//! Exactness of the built-in encodings against tiktoken-rs (its own copy of
//! the vocabularies and the reference regex): counts, ids, and the segmented
//! paths of `count_until` and `truncate`, on generated adversarial text
//! always, and on every chat message of the evaluation data when present.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ctxfold_core::tokens::{Encoding, Side, TokenCounter};
use rayon::prelude::*;

fn reference(encoding: Encoding) -> tiktoken_rs::CoreBPE {
    match encoding {
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
        Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
    }
}

/// Texts joined with `\n` into documents of about `size` bytes, so that the
/// segmented paths cut them at many places.
fn documents(texts: &[String], size: usize) -> Vec<String> {
    let mut docs = vec![String::new()];
    for text in texts {
        let last = docs.last_mut().unwrap();
        if last.len() > size {
            docs.push(String::new());
        }
        let last = docs.last_mut().unwrap();
        last.push_str(text);
        last.push('\n');
    }
    docs
}

/// Every mismatch, as (encoding, what, text prefix): empty when exact.
fn mismatches(encoding: Encoding, texts: &[String], check_ids: bool) -> Vec<String> {
    let reference = reference(encoding);
    let counter = TokenCounter::OpenAi(encoding);
    texts
        .par_iter()
        .flat_map_iter(|text| {
            let expected = reference.encode_ordinary(text);
            let n = expected.len();
            let shown = || format!("{} {:?}", encoding.name(), text.chars().take(60).collect::<String>());
            let mut wrong = Vec::new();
            let count = counter.count(text).unwrap();
            if count != n {
                wrong.push(format!("count {count} != {n}: {}", shown()));
            }
            if counter.count_until(text, usize::MAX).unwrap() != Some(n) {
                wrong.push(format!("count_until(MAX) != {n}: {}", shown()));
            }
            if n > 0 && counter.count_until(text, n - 1).unwrap().is_some() {
                wrong.push(format!("count_until({}) is not None: {}", n - 1, shown()));
            }
            if check_ids && counter.encode(text).unwrap() != expected {
                wrong.push(format!("ids differ: {}", shown()));
            }
            if check_ids && n > 1 {
                // Truncation encodes only a prefix or suffix cut at a piece boundary: its cut must be the reference's.
                let half = n / 2;
                for (side, kept) in [(Side::End, &expected[..half]), (Side::Start, &expected[n - half..])] {
                    let cut = counter.truncate(text, half, side).unwrap();
                    let exact = reference.decode(kept).ok().filter(|t| reference.encode_ordinary(t).len() <= half);
                    if exact.is_some_and(|t| t != cut) || reference.encode_ordinary(cut).len() > half {
                        wrong.push(format!("truncate({half}, {side:?}) differs: {}", shown()));
                    }
                }
            }
            wrong
        })
        .collect()
}

fn assert_exact(texts: &[String], check_ids: bool) {
    for encoding in Encoding::ALL {
        let wrong = mismatches(encoding, texts, check_ids);
        assert!(wrong.is_empty(), "{} mismatches of {} texts, first: {:?}", wrong.len(), texts.len(), &wrong[..wrong.len().min(5)]);
    }
}

#[test]
fn exact_on_generated_adversarial_text() {
    let texts = support::adversarial_texts(4000, 60, 0x5EED);
    assert_exact(&texts, true);
    assert_exact(&documents(&texts, 50_000), true);
}

#[test]
fn truncate_cuts_documents_on_reference_token_boundaries() {
    let texts = support::adversarial_texts(1500, 40, 0xC0FFEE);
    for encoding in Encoding::ALL {
        let reference = reference(encoding);
        let counter = TokenCounter::OpenAi(encoding);
        for doc in documents(&texts, 30_000) {
            let ids = reference.encode_ordinary(&doc);
            for max in [1, 100, ids.len() / 3, ids.len() - 1] {
                let head = counter.truncate(&doc, max, Side::End).unwrap();
                let tail = counter.truncate(&doc, max, Side::Start).unwrap();
                assert!(reference.encode_ordinary(head).len() <= max && reference.encode_ordinary(tail).len() <= max);
                let first = reference.decode(&ids[..max]);
                if let Ok(first) = first {
                    if doc.starts_with(&first) && reference.encode_ordinary(&first).len() <= max {
                        assert_eq!(head, first, "{} head of {max}", encoding.name());
                    }
                }
                let last = reference.decode(&ids[ids.len() - max..]);
                if let Ok(last) = last {
                    if doc.ends_with(&last) && reference.encode_ordinary(&last).len() <= max {
                        assert_eq!(tail, last, "{} tail of {max}", encoding.name());
                    }
                }
            }
        }
    }
}

/// Every message of LongMemEval-S, REALTALK and BEAM 100K, one by one and
/// joined into documents, and a larger adversarial set. Skips (with the
/// reason printed) when the evaluation data is absent.
#[test]
fn exact_on_every_shared_message() {
    let Some(data) = support::shared_data() else { return };
    let messages = support::chat_messages(&data);
    assert!(messages.len() > 40_000, "only {} messages found under {}", messages.len(), data.display());
    assert_exact(&messages, true);
    assert_exact(&documents(&messages, 200_000), false);
    assert_exact(&support::adversarial_texts(30_000, 200, 0xADE5), true);
}
