//! The core counter against the `tiktoken` crate called directly and against
//! `bpe-openai`, on every chat message of the evaluation data, one thread,
//! in one run:
//!
//!     cargo bench -p ctxfold-core --bench count
//!
//! Each row is the time of one pass over all messages (each counted on its
//! own): the best and the median of `ROUNDS` passes. Counts are checked equal
//! before anything is timed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::Instant;

use ctxfold_core::tokens::{Encoding, Side, TokenCounter};

const ROUNDS: usize = 7;

fn time(label: &str, peer_best: Option<f64>, mut pass: impl FnMut() -> usize) -> f64 {
    black_box(pass());
    let mut times: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            black_box(pass());
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let (best, median) = (times[0], times[ROUNDS / 2]);
    let ratio = peer_best.map(|p| format!("  {:.2}x the tiktoken crate", p / best)).unwrap_or_default();
    println!("  {label:<44} best {:>8.1} ms  median {:>8.1} ms{ratio}", best * 1e3, median * 1e3);
    best
}

fn main() {
    let Some(data) = support::shared_data() else { return };
    let messages = support::chat_messages(&data);
    let bytes: usize = messages.iter().map(String::len).sum();
    println!("{} messages, {:.1} MB, one thread, {ROUNDS} passes each", messages.len(), bytes as f64 / 1e6);
    for encoding in Encoding::ALL {
        let core = TokenCounter::OpenAi(encoding);
        let crate_bpe = tiktoken::get_encoding(encoding.name()).unwrap();
        let bpe_openai = match encoding {
            Encoding::Cl100kBase => bpe_openai::cl100k_base(),
            Encoding::O200kBase => bpe_openai::o200k_base(),
        };
        let total: usize = messages.iter().map(|m| core.count(m).unwrap()).sum();
        for m in &messages {
            let n = core.count(m).unwrap();
            assert_eq!(n, crate_bpe.count(m), "the tiktoken crate disagrees on {m:?}");
            assert_eq!(n, bpe_openai.count(m), "bpe-openai disagrees on {m:?}");
        }
        println!("{}: {total} tokens", encoding.name());
        let peer = time("tiktoken crate: count", None, || messages.iter().map(|m| crate_bpe.count(m)).sum());
        time("bpe-openai: count", Some(peer), || messages.iter().map(|m| bpe_openai.count(m)).sum());
        time("core: count", Some(peer), || messages.iter().map(|m| core.count(m).unwrap()).sum());
        time("core: count_until(limit never reached)", Some(peer), || {
            messages.iter().map(|m| core.count_until(m, usize::MAX).unwrap().unwrap_or(0)).sum()
        });
        let encode_peer = time("tiktoken crate: encode", None, || messages.iter().map(|m| crate_bpe.encode(m).len()).sum());
        time("core: encode", Some(encode_peer), || messages.iter().map(|m| core.encode(m).unwrap().len()).sum());
        time("core: truncate to 100 tokens (end)", Some(encode_peer), || {
            messages.iter().map(|m| core.truncate(m, 100, Side::End).unwrap().len()).sum()
        });
        time("core: truncate to 100 tokens (start)", Some(encode_peer), || {
            messages.iter().map(|m| core.truncate(m, 100, Side::Start).unwrap().len()).sum()
        });
    }
}
