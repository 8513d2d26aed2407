//! Okapi BM25 over a fixed list of texts: the lexical half of relevance.
//!
//! Tokenisation (also exposed as `tokenize`): lowercase; split into runs of
//! Unicode letters and digits; drop a short list of English stop words; reduce
//! each word with the Snowball English stemmer (so "meetings" matches
//! "meeting"). Scores use the Lucene idf `ln(1 + (N - df + 0.5) / (df + 0.5))`,
//! which is never negative, and each distinct query term counts once.

use rust_stemmers::{Algorithm, Stemmer};
use rustc_hash::FxHashMap;

use crate::{Error, Result};

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with", "i", "me", "my", "you", "your", "we", "our", "he", "she", "his", "her", "its", "do", "did",
    "does", "have", "has", "had", "been", "so", "can", "what", "which", "who", "how", "when", "where", "would",
    "could", "should", "am", "were", "from", "about", "just", "also", "any", "some",
];

/// The terms BM25 sees in `text`.
pub fn tokenize(text: &str) -> Vec<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    words(text).filter_map(|w| term(&stemmer, &w)).collect()
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

fn term(stemmer: &Stemmer, word: &str) -> Option<String> {
    if STOP_WORDS.contains(&word) {
        return None;
    }
    Some(stemmer.stem(word).into_owned())
}

/// An inverted index with BM25 parameters `k1` and `b`.
pub struct Bm25 {
    k1: f64,
    b: f64,
    vocabulary: FxHashMap<String, usize>,
    /// For each term, the (document, term frequency) pairs that contain it.
    postings: Vec<Vec<(u32, u32)>>,
    doc_lengths: Vec<u32>,
    average_length: f64,
}

impl Bm25 {
    pub fn new<S: AsRef<str>>(texts: &[S], k1: f64, b: f64) -> Result<Self> {
        if !(k1.is_finite() && k1 >= 0.0) {
            return Err(Error::invalid("k1", format!("must be a finite number >= 0, got {k1}")));
        }
        if !(0.0..=1.0).contains(&b) {
            return Err(Error::invalid("b", format!("must be in [0, 1], got {b}")));
        }
        let stemmer = Stemmer::create(Algorithm::English);
        let mut index = Bm25 { k1, b, vocabulary: FxHashMap::default(), postings: Vec::new(), doc_lengths: Vec::new(), average_length: 0.0 };
        for (doc, text) in texts.iter().enumerate() {
            index.add_document(doc as u32, text.as_ref(), &stemmer);
        }
        let total: u64 = index.doc_lengths.iter().map(|&l| u64::from(l)).sum();
        index.average_length = if texts.is_empty() { 0.0 } else { total as f64 / texts.len() as f64 };
        Ok(index)
    }

    fn add_document(&mut self, doc: u32, text: &str, stemmer: &Stemmer) {
        let mut counts: FxHashMap<usize, u32> = FxHashMap::default();
        let mut length = 0u32;
        for t in words(text).filter_map(|w| term(stemmer, &w)) {
            let next_id = self.vocabulary.len();
            let id = *self.vocabulary.entry(t).or_insert(next_id);
            if id == self.postings.len() {
                self.postings.push(Vec::new());
            }
            *counts.entry(id).or_insert(0) += 1;
            length += 1;
        }
        let mut counts: Vec<(usize, u32)> = counts.into_iter().collect();
        counts.sort_unstable();
        for (id, tf) in counts {
            self.postings[id].push((doc, tf));
        }
        self.doc_lengths.push(length);
    }

    pub fn len(&self) -> usize {
        self.doc_lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc_lengths.is_empty()
    }

    /// The BM25 score of every document for `query` (0 where no term matches).
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.len()];
        let n = self.len() as f64;
        let mut terms = tokenize(query);
        terms.sort_unstable();
        terms.dedup();
        for t in terms {
            let Some(&id) = self.vocabulary.get(&t) else { continue };
            let postings = &self.postings[id];
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in postings {
                let tf = f64::from(tf);
                let norm = 1.0 - self.b + self.b * f64::from(self.doc_lengths[doc as usize]) / self.average_length.max(1e-9);
                scores[doc as usize] += idf * tf * (self.k1 + 1.0) / (tf + self.k1 * norm);
            }
        }
        scores
    }
}
