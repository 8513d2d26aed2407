//! Running a computation with several parallel passes on rayon's pool.

/// Runs `work` on one of rayon's threads when `parallel` (the caller's
/// thread sleeps until it is done), else on the caller's thread.
///
/// Why: between two parallel passes rayon's workers spin for a while before
/// they sleep. Called from a thread outside the pool, the sequential work
/// between the passes then competes with them for the cores. Inside the
/// pool, the work's own thread is one of the
/// workers. Small inputs, with no parallel pass, skip the hand-over, which
/// costs more than it saves there.
pub(crate) fn on_pool_if<R: Send>(parallel: bool, work: impl FnOnce() -> R + Send) -> R {
    if parallel {
        rayon::scope(|_| work())
    } else {
        work()
    }
}
