//! One error type for the whole core. The Python binding maps each variant to
//! one class of the `ctxfold.CtxFoldError` hierarchy, so the variants are
//! chosen by what a caller must do about them, not by where they arise.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// An argument has a value the function cannot work with.
    InvalidInput { argument: String, message: String },
    /// A model name that maps to no known encoding.
    UnknownModel { name: String, known: Vec<String> },
    /// An encoding name that is not built in.
    UnknownEncoding { name: String, known: Vec<String> },
    /// A file named by an argument does not exist.
    FileNotFound { argument: String, path: String },
    /// What must be kept does not fit the budget.
    Budget { needed: u64, budget: u64, message: String },
}

impl Error {
    pub fn invalid(argument: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidInput { argument: argument.into(), message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidInput { argument, message } => write!(f, "{argument}: {message}"),
            Error::UnknownModel { name, known } => write!(
                f,
                "model: unknown model {name:?}; pass encoding=\"cl100k_base\" or \"o200k_base\" \
                 instead, or one of the known models: {}",
                known.join(", ")
            ),
            Error::UnknownEncoding { name, known } => write!(
                f,
                "encoding: unknown encoding {name:?}; use one of: {} \
                 (or Tokenizer.from_file(path) for a Hugging Face tokenizer.json)",
                known.join(", ")
            ),
            Error::FileNotFound { argument, path } => {
                write!(f, "{argument}: no such file {path:?}; check the path")
            }
            Error::Budget { needed, budget, message } => write!(
                f,
                "budget: {message} needs {needed} tokens but the budget is {budget} \
                 ({} over); raise the budget or protect less",
                needed.saturating_sub(*budget)
            ),
        }
    }
}

impl std::error::Error for Error {}
