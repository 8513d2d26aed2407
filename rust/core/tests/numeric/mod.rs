//! Helpers shared by the numeric tests: a deterministic generator and the
//! argument an error names.
#![allow(dead_code, clippy::panic)]

use ctxfold_core::Error;

/// Small deterministic generator for test data.
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

pub fn invalid_argument(e: Error) -> String {
    match e {
        Error::InvalidInput { argument, .. } => argument,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}
