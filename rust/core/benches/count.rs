//! The core counter against the `tiktoken` crate called directly and against
//! `bpe-openai`, on every chat message of the evaluation data, one thread,
//! in one run:
//!
//!     cargo bench -p ctxfold-core --bench count
//!
//! Each figure is the time of one pass over all messages (each counted on its
//! own): best and median of `ROUNDS` passes. Rounds interleave the
//! contenders, so that load from other processes falls on all of them alike.
//! Counts are checked equal before anything is timed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::Instant;

use ctxfold_core::tokens::{Encoding, Side, TokenCounter};

const ROUNDS: usize = 9;

type Pass<'a> = Box<dyn Fn() -> usize + 'a>;

/// Runs every pass `ROUNDS` times, interleaved; prints best and median, and
/// the ratio of best times to the pass named in `peer_of` (index).
fn run(rows: &[(&str, Option<usize>, Pass<'_>)]) {
    for (_, _, pass) in rows {
        black_box(pass());
    }
    let mut times = vec![Vec::with_capacity(ROUNDS); rows.len()];
    for _ in 0..ROUNDS {
        for (i, (_, _, pass)) in rows.iter().enumerate() {
            let start = Instant::now();
            black_box(pass());
            times[i].push(start.elapsed().as_secs_f64());
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    for (i, (label, peer, _)) in rows.iter().enumerate() {
        let (best, median) = (times[i][0], times[i][ROUNDS / 2]);
        let ratio = peer
            .map(|p| format!("  {:.2}x {} (best), {:.2}x (median)", times[p][0] / best, rows[p].0, times[p][ROUNDS / 2] / median))
            .unwrap_or_default();
        println!("  {label:<42} best {:>7.1} ms  median {:>7.1} ms{ratio}", best * 1e3, median * 1e3);
    }
}

fn main() {
    let Some(data) = support::shared_data() else { return };
    let messages = support::chat_messages(&data);
    let bytes: usize = messages.iter().map(String::len).sum();
    println!("{} messages, {:.1} MB, one thread, {ROUNDS} interleaved rounds", messages.len(), bytes as f64 / 1e6);
    for encoding in Encoding::ALL {
        let core = TokenCounter::OpenAi(encoding);
        let tk = tiktoken_crate::get_encoding(encoding.name()).unwrap();
        let bo = match encoding {
            Encoding::Cl100kBase => bpe_openai::cl100k_base(),
            Encoding::O200kBase => bpe_openai::o200k_base(),
        };
        let mut total = 0;
        for m in &messages {
            let n = core.count(m).unwrap();
            assert_eq!(n, tk.count(m), "the tiktoken crate disagrees on {m:?}");
            assert_eq!(n, bo.count(m), "bpe-openai disagrees on {m:?}");
            total += n;
        }
        println!("{}: {total} tokens", encoding.name());
        let m = &messages;
        let rows: Vec<(&str, Option<usize>, Pass<'_>)> = vec![
            ("tiktoken crate: count", None, Box::new(|| m.iter().map(|t| tk.count(t)).sum())),
            ("bpe-openai: count", Some(0), Box::new(|| m.iter().map(|t| bo.count(t)).sum())),
            ("core: count", Some(0), Box::new(|| m.iter().map(|t| core.count(t).unwrap()).sum())),
            ("core: count_until (not reached)", Some(0), Box::new(|| {
                m.iter().map(|t| core.count_until(t, usize::MAX).unwrap().unwrap_or(0)).sum()
            })),
            ("tiktoken crate: encode", None, Box::new(|| m.iter().map(|t| tk.encode(t).len()).sum())),
            ("core: encode", Some(4), Box::new(|| m.iter().map(|t| core.encode(t).unwrap().len()).sum())),
            // What a user of the crate writes to truncate: encode, then decode the ids kept.
            ("tiktoken crate: encode, decode 100, end", None, Box::new(|| {
                m.iter().map(|t| {
                    let ids = tk.encode(t);
                    if ids.len() > 100 { String::from_utf8_lossy(&tk.decode(&ids[..100])).len() } else { t.len() }
                }).sum()
            })),
            ("core: truncate to 100 tokens, end", Some(6), Box::new(|| {
                m.iter().map(|t| core.truncate(t, 100, Side::End).unwrap().len()).sum()
            })),
            ("tiktoken crate: encode, decode 100, start", None, Box::new(|| {
                m.iter().map(|t| {
                    let ids = tk.encode(t);
                    if ids.len() > 100 { String::from_utf8_lossy(&tk.decode(&ids[ids.len() - 100..])).len() } else { t.len() }
                }).sum()
            })),
            ("core: truncate to 100 tokens, start", Some(8), Box::new(|| {
                m.iter().map(|t| core.truncate(t, 100, Side::Start).unwrap().len()).sum()
            })),
        ];
        run(&rows);
    }
}
