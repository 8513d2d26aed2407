//! Static embeddings: the direct WordPiece path against the `tokenizers`
//! pipeline, the pooling arithmetic, batches, and every error path. Uses the
//! MiniLM tokenizer.json shipped in models/ (inside the repository).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use ctxfold_core::static_embed::StaticEmbedder;
use ctxfold_core::Error;
use ndarray::{Array1, Array2};

fn tokenizer_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/all-MiniLM-L6-v2/tokenizer.json")
}

const VOCAB: usize = 30522;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f32 {
        (self.below(1 << 24) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// A random table and weights, so every token id has a distinct row.
fn embedder(dim: usize, seed: u64) -> StaticEmbedder {
    let mut rng = Rng(seed);
    let table = Array2::from_shape_fn((VOCAB, dim), |_| rng.unit());
    let weights = Array1::from_shape_fn(VOCAB, |_| (rng.unit() + 1.0) / 2.0);
    StaticEmbedder::from_file(&tokenizer_path(), table.view(), weights.view()).unwrap()
}

fn reference_embedding(e: &StaticEmbedder, table: &Array2<f32>, weights: &Array1<f32>, text: &str) -> Vec<f64> {
    let ids = e.reference_token_ids(text).unwrap();
    let mut sum = vec![0.0f64; table.ncols()];
    for &id in &ids {
        for (s, &x) in sum.iter_mut().zip(table.row(id as usize)) {
            *s += f64::from(weights[id as usize]) * f64::from(x);
        }
    }
    let norm = sum.iter().map(|v| v * v).sum::<f64>().sqrt();
    sum.iter().map(|v| if norm > 0.0 { v / norm } else { 0.0 }).collect()
}

const SAMPLES: &[&str] = &[
    "",
    "   \n\t  ",
    "Hello, world!",
    "I'm planning a trip to Paris next week -- can you recommend hotels?",
    "unbelievablyinconsequentialwordthatisnotinthevocabulary",
    "[CLS] hello [SEP] [MASK] [UNK] [PAD] [cls] a[SEP]b [notatoken]",
    "café naïve résumé Ångström",
    "The price was $1,234.56 (approx.) on 2023/05/21 at 19:50 #tag @user ~x^y|z",
    "emoji 😀 and curly ‘quotes’ — dashes… and non\u{a0}breaking spaces",
    "中文字符 and 日本語 and 한국어",
    "tab\tseparated\r\nlines\u{b}vertical\u{c}feed\u{0}null\u{7f}del",
    "zero\u{200b}width joiner\u{200d}here",
    "ÀÉÎÕÜ İstanbul ß ﬁ ligature",
    "snake_case CamelCase kebab-case path/to/file.rs:42 https://example.com/a?b=c&d=e",
    "```python\ndef f(x):\n    return x ** 2  # square\n```",
    "\u{fffd} replacement and \u{301}combining at start",
];

#[test]
fn direct_tokenizer_path_is_taken_for_minilm() {
    assert!(embedder(4, 1).has_fast_tokenizer());
}

#[test]
fn token_ids_equal_the_tokenizers_pipeline_on_samples() {
    let e = embedder(4, 1);
    let (exact, over) = ("x".repeat(100), "x".repeat(101));
    for text in SAMPLES.iter().copied().chain([exact.as_str(), over.as_str()]) {
        assert_eq!(e.token_ids(text).unwrap(), e.reference_token_ids(text).unwrap(), "text {text:?}");
    }
}

#[test]
fn token_ids_equal_the_tokenizers_pipeline_on_random_text() {
    let e = embedder(4, 2);
    let pieces = [
        "the", "The", "THE", "tokenization", "zxqv", "a", "I", "'", "\"", ".", ",", "!", "?", "-", "[", "]", "[SEP]",
        "(", ")", "#", "##", "$", "%", "0", "42", "3.14", "é", "ü", "😀", "中", "—", "’", "\u{0}", "\u{1}", "\u{7f}",
        "\u{a0}", "\u{2003}", "\u{200b}", "\u{301}", "\u{fffd}", "ǅ", "İ", "ﬃ", "Ⅻ", "_", "`", "~", "\\", "/",
    ];
    let separators = ["", "", " ", "  ", "\n", "\t", "\r\n"];
    let mut rng = Rng(7);
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..rng.below(12) {
            text.push_str(pieces[rng.below(pieces.len() as u64) as usize]);
            text.push_str(separators[rng.below(separators.len() as u64) as usize]);
        }
        // Random printable ASCII too, which exercises WordPiece splits of unknown words.
        for _ in 0..rng.below(20) {
            text.push(char::from(b' ' + rng.below(95) as u8));
        }
        assert_eq!(e.token_ids(&text).unwrap(), e.reference_token_ids(&text).unwrap(), "text {text:?}");
    }
}

#[test]
fn embedding_is_the_normalised_weighted_mean() {
    let dim = 16;
    let mut rng = Rng(3);
    let table = Array2::from_shape_fn((VOCAB, dim), |_| rng.unit());
    let weights = Array1::from_shape_fn(VOCAB, |_| (rng.unit() + 1.0) / 2.0);
    let e = StaticEmbedder::from_file(&tokenizer_path(), table.view(), weights.view()).unwrap();
    let long = SAMPLES[3].repeat(500);
    for text in SAMPLES.iter().copied().chain([long.as_str()]) {
        let got = e.embed(text).unwrap();
        let want = reference_embedding(&e, &table, &weights, text);
        for (g, w) in got.iter().zip(&want) {
            assert!((f64::from(*g) - w).abs() < 1e-6, "text {text:?}: {g} vs {w}");
        }
    }
}

#[test]
fn empty_and_whitespace_texts_give_the_zero_vector() {
    let e = embedder(8, 4);
    for text in ["", " ", "\n\t\r\n "] {
        assert_eq!(e.embed(text).unwrap(), vec![0.0; 8]);
    }
}

#[test]
fn zero_weights_give_the_zero_vector() {
    let table = Array2::from_elem((VOCAB, 3), 1.0f32);
    let weights = Array1::zeros(VOCAB);
    let e = StaticEmbedder::from_file(&tokenizer_path(), table.view(), weights.view()).unwrap();
    assert_eq!(e.embed("hello world").unwrap(), vec![0.0; 3]);
}

#[test]
fn batch_rows_equal_single_embeddings() {
    let e = embedder(32, 5);
    let texts: Vec<String> = (0..200).map(|i| format!("{} number {i}", SAMPLES[i % SAMPLES.len()])).collect();
    let batch = e.embed_batch(&texts).unwrap();
    assert_eq!(batch.dim(), (200, 32));
    for (i, text) in texts.iter().enumerate() {
        assert_eq!(batch.row(i).to_vec(), e.embed(text).unwrap(), "row {i}");
    }
    assert_eq!(e.embed_batch::<&str>(&[]).unwrap().dim(), (0, 32));
    let counts = e.count_tokens_batch(&texts).unwrap();
    assert_eq!(counts[1], e.token_ids(&texts[1]).unwrap().len());
}

#[test]
fn unit_norm_and_deterministic() {
    let e = embedder(64, 6);
    let v = e.embed("The quick brown fox jumps over the lazy dog.").unwrap();
    let norm: f64 = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-6);
    assert_eq!(v, e.embed("The quick brown fox jumps over the lazy dog.").unwrap());
    assert_eq!(v, e.embed("the QUICK brown fox  jumps over the lazy dog .").unwrap(), "lowercased, whitespace-insensitive");
}

fn invalid_argument(result: Result<StaticEmbedder, Error>) -> (String, String) {
    match result {
        Err(Error::InvalidInput { argument, message }) => (argument, message),
        Err(other) => panic!("expected InvalidInput, got {other:?}"),
        Ok(_) => panic!("expected an error"),
    }
}

#[test]
fn bad_tables_are_refused_with_the_argument_named() {
    let path = tokenizer_path();
    let w = Array1::<f32>::ones(VOCAB);
    let (arg, msg) = invalid_argument(StaticEmbedder::from_file(&path, Array2::zeros((100, 4)).view(), Array1::ones(100).view()));
    assert_eq!(arg, "table");
    assert!(msg.contains("100 rows") && msg.contains("30522"), "{msg}");
    let (arg, _) = invalid_argument(StaticEmbedder::from_file(&path, Array2::zeros((VOCAB, 0)).view(), w.view()));
    assert_eq!(arg, "table");
    let (arg, msg) = invalid_argument(StaticEmbedder::from_file(&path, Array2::zeros((VOCAB, 4)).view(), Array1::ones(5).view()));
    assert_eq!(arg, "weights");
    assert!(msg.contains("5 values"), "{msg}");
    let mut table = Array2::<f32>::zeros((VOCAB, 4));
    table[[7, 2]] = f32::NAN;
    let (arg, msg) = invalid_argument(StaticEmbedder::from_file(&path, table.view(), w.view()));
    assert_eq!(arg, "table");
    assert!(msg.contains("table[7, 2]"), "{msg}");
    let mut bad_w = w.clone();
    bad_w[9] = -1.0;
    let (arg, msg) = invalid_argument(StaticEmbedder::from_file(&path, Array2::zeros((VOCAB, 4)).view(), bad_w.view()));
    assert_eq!(arg, "weights");
    assert!(msg.contains("weights[9]"), "{msg}");
}

#[test]
fn missing_tokenizer_file_is_file_not_found() {
    let table = Array2::<f32>::zeros((VOCAB, 4));
    let weights = Array1::<f32>::ones(VOCAB);
    let result = StaticEmbedder::from_file(std::path::Path::new("/nonexistent/tokenizer.json"), table.view(), weights.view());
    assert!(matches!(result, Err(Error::FileNotFound { .. })));
}

#[test]
fn pool_checks_ids_and_output_length() {
    let e = embedder(4, 8);
    let mut out = vec![0.0; 4];
    assert!(matches!(e.pool(&[VOCAB as u32], &mut out), Err(Error::InvalidInput { argument, .. }) if argument == "ids"));
    let mut short = vec![0.0; 3];
    assert!(matches!(e.pool(&[1], &mut short), Err(Error::InvalidInput { argument, .. }) if argument == "out"));
}
