//! Contiguous topic segmentation of a sequence of blocks (sentences,
//! messages) from their similarity matrix: [`segment`] splits it into
//! consecutive segments by an exact dynamic program (`contiguous`).

mod contiguous;
mod objective;
mod solve;
mod windows;

pub use contiguous::{segment, SegmentOptions};
pub use objective::{segmentation_objective, segmentation_objective_with_costs};
