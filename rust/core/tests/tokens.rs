//! Token counts against tiktoken-rs (the Rust port of tiktoken, with its own
//! copy of the vocabularies): a fixed multilingual corpus and random text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ctxfold_core::tokens::{Encoding, Side, TokenCounter};
use ctxfold_core::Error;

fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        "Hello, world! How are you doing today?",
        "The quick brown fox jumps over the lazy dog. It's what we'd've done, isn't it?",
        "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
        "def f(a, b=3):\n\treturn {'k': [a, b, None]}\n\n\n",
        r#"{"role": "assistant", "tool_calls": [{"id": "call_1", "function": {"name": "get", "arguments": "{\"q\": 1}"}}]}"#,
        "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
        "Emoji: 👍🏽 👨‍👩‍👧‍👦 🇩🇪 ✨🔥 and combining é vs é",
        "Привет, как дела? Ελληνικά κείμενα. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया",
        "   leading and trailing   \n\n\n   \t\t  ",
        "line1\r\nline2\r\n\r\n    indented\n\t\ttabs",
        "numbers 1234567890 3.14159 -42 1e10 0xFF 1,000,000",
        "<|endoftext|> is plain text here, <|im_start|> too",
        "I'M SHOUTING, YOU'LL SEE. We'RE here. They'Ve gone.",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.push(" ".repeat(5000));
    texts.push(format!("x{}y", " \n".repeat(2000)));
    texts.push("a".repeat(100_000));
    texts.push("🙂".repeat(3000));
    texts
}

/// Deterministic random text drawn from ASCII, whitespace, Latin-1, CJK,
/// emoji and combining marks, so that every pre-tokenizer branch is hit.
fn random_texts(n: usize, seed: u64) -> Vec<String> {
    let mut state = seed;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let pools: [&[char]; 6] = [
        &['a', 'b', 'Z', 'q', '1', '9', '0', '\'', 's', 't', 'd', 'l'],
        &[' ', ' ', '\n', '\t', '\r', '\u{a0}', '\u{3000}'],
        &['.', ',', '!', '{', '}', '"', '/', '-', '_', '$', '(', ')'],
        &['é', 'ß', 'Ä', 'ñ', 'Ω', 'ж', 'Ж'],
        &['東', '京', '日', '本', '한', '국', 'ア'],
        &['😀', '👍', '\u{1F3FD}', '\u{200D}', '\u{301}', '\u{FE0F}'],
    ];
    (0..n)
        .map(|_| {
            let len = (next() % 120) as usize;
            (0..len)
                .map(|_| {
                    let pool = pools[(next() % pools.len() as u64) as usize];
                    pool[(next() % pool.len() as u64) as usize]
                })
                .collect()
        })
        .collect()
}

fn reference(encoding: Encoding) -> tiktoken_rs::CoreBPE {
    match encoding {
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
        Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
    }
}

fn check_equal_to_reference(encoding: Encoding, texts: &[String]) {
    let reference = reference(encoding);
    let counter = TokenCounter::OpenAi(encoding);
    let counts = counter.count_batch(texts).unwrap();
    for (text, count) in texts.iter().zip(counts) {
        let expected = reference.encode_ordinary(text);
        assert_eq!(count, expected.len(), "{} count of {:?}", encoding.name(), &text[..text.len().min(80)]);
        assert_eq!(counter.encode(text).unwrap(), expected, "{} ids", encoding.name());
    }
}

#[test]
fn counts_equal_tiktoken_on_the_corpus() {
    for encoding in Encoding::ALL {
        check_equal_to_reference(encoding, &corpus());
    }
}

#[test]
fn counts_equal_tiktoken_on_random_text() {
    for encoding in Encoding::ALL {
        check_equal_to_reference(encoding, &random_texts(3000, 0x9E37_79B9_7F4A_7C15));
    }
}

#[test]
fn count_until_agrees_with_count() {
    for encoding in Encoding::ALL {
        let counter = TokenCounter::OpenAi(encoding);
        for text in corpus().iter().chain(random_texts(300, 7).iter()) {
            let full = counter.count(text).unwrap();
            for limit in [0, 1, 2, 5, full.saturating_sub(1), full, full + 1, 10_000] {
                let expected = (full <= limit).then_some(full);
                assert_eq!(counter.count_until(text, limit).unwrap(), expected, "limit {limit}");
            }
        }
    }
}

#[test]
fn truncate_keeps_a_maximal_token_prefix_or_suffix() {
    for encoding in Encoding::ALL {
        let counter = TokenCounter::OpenAi(encoding);
        for text in corpus().iter().chain(random_texts(300, 11).iter()) {
            let ids = counter.encode(text).unwrap();
            for max in [0, 1, 3, 17, ids.len() / 2, ids.len()] {
                let head = counter.truncate(text, max, Side::End).unwrap();
                let tail = counter.truncate(text, max, Side::Start).unwrap();
                assert!(text.starts_with(head) && text.ends_with(tail));
                assert!(counter.count(head).unwrap() <= max && counter.count(tail).unwrap() <= max);
                // When the first `max` tokens decode to whole characters, that is
                // exactly what truncation keeps.
                let first = counter.decode(&ids[..max.min(ids.len())]).unwrap();
                if text.starts_with(&first) && counter.count(&first).unwrap() <= max {
                    assert_eq!(head, first);
                }
            }
        }
    }
}

#[test]
fn decode_inverts_encode_and_rejects_unknown_ids() {
    let counter = TokenCounter::OpenAi(Encoding::Cl100kBase);
    for text in corpus() {
        assert_eq!(counter.decode(&counter.encode(&text).unwrap()).unwrap(), text);
    }
    let err = counter.decode(&[1, 2, 999_999]).unwrap_err();
    assert!(matches!(err, Error::InvalidInput { ref argument, .. } if argument == "ids"), "{err}");
}

#[test]
fn models_map_to_their_encodings() {
    let enc = |m| ctxfold_core::tokens::encoding_for_model(m).unwrap();
    assert_eq!(enc("gpt-4o"), Encoding::O200kBase);
    assert_eq!(enc("gpt-4o-2024-08-06"), Encoding::O200kBase);
    assert_eq!(enc("o4-mini"), Encoding::O200kBase);
    assert_eq!(enc("gpt-4.1-mini"), Encoding::O200kBase);
    assert_eq!(enc("gpt-4"), Encoding::Cl100kBase);
    assert_eq!(enc("gpt-3.5-turbo-0125"), Encoding::Cl100kBase);
    assert_eq!(enc("ft:gpt-4o-mini:acme::abc"), Encoding::O200kBase);
    let err = ctxfold_core::tokens::encoding_for_model("llama-3").unwrap_err();
    let message = err.to_string();
    assert!(message.contains("llama-3") && message.contains("gpt-4o") && message.contains("o200k_base"));
}

#[test]
fn bad_names_are_errors() {
    assert!(matches!(Encoding::from_name("p50k"), Err(Error::UnknownEncoding { .. })));
    assert!(matches!(Side::from_name("middle"), Err(Error::InvalidInput { .. })));
    assert!(TokenCounter::resolve(Some("gpt-4"), Some("o200k_base")).is_err());
    assert_eq!(TokenCounter::resolve(None, None).unwrap(), Encoding::O200kBase);
    let missing = TokenCounter::from_file(std::path::Path::new("/nonexistent/tokenizer.json"));
    assert!(matches!(missing, Err(Error::FileNotFound { .. })));
}
