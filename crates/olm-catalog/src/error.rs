//! Errors of the catalog crate.

use std::fmt;
use std::path::{Path, PathBuf};

/// One thing wrong with a catalog, located as precisely as we can: the file (when
/// known), the package / channel / bundle, what is wrong and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: Option<PathBuf>,
    pub package: Option<String>,
    pub channel: Option<String>,
    pub bundle: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to change, when we can say.
    pub fix: Option<String>,
    /// PascalCase category of the problem (e.g. `MissingBundle`, `MultipleHeads`);
    /// `Invalid` when not more specific.
    pub code: &'static str,
    /// What is sound is whole without what this names (a CSV of a legacy package that no
    /// channel reaches is left out): render and serve go on and say so; validate reports it.
    pub warning: bool,
}

impl Problem {
    pub fn new(message: impl Into<String>) -> Problem {
        Problem {
            file: None,
            package: None,
            channel: None,
            bundle: None,
            message: message.into(),
            fix: None,
            code: "Invalid",
            warning: false,
        }
    }
    pub fn warning(mut self) -> Problem {
        self.warning = true;
        self
    }
    pub fn file(mut self, file: Option<&Path>) -> Problem {
        self.file = file.map(Path::to_path_buf);
        self
    }
    pub fn package(mut self, package: impl Into<String>) -> Problem {
        self.package = Some(package.into());
        self
    }
    pub fn channel(mut self, channel: impl Into<String>) -> Problem {
        self.channel = Some(channel.into());
        self
    }
    pub fn bundle(mut self, bundle: impl Into<String>) -> Problem {
        self.bundle = Some(bundle.into());
        self
    }
    pub fn code(mut self, code: &'static str) -> Problem {
        self.code = code;
        self
    }
    pub fn fix(mut self, fix: impl Into<String>) -> Problem {
        self.fix = Some(fix.into());
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        let mut wrote = false;
        for (kind, value) in [
            ("package", &self.package),
            ("channel", &self.channel),
            ("bundle", &self.bundle),
        ] {
            if let Some(value) = value {
                write!(f, "{}{kind} {}", if wrote { ", " } else { "" }, crate::quote::quoted(value))?;
                wrote = true;
            }
        }
        if wrote {
            f.write_str(": ")?;
        }
        f.write_str(&self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

/// Errors of loading, building and rendering catalogs.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file is not valid YAML/JSON, or a document is not a usable catalog object.
    #[error("{}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    /// A file or document exceeds a safety limit.
    #[error("{}: {message}", path.display())]
    TooLarge { path: PathBuf, message: String },
    /// The directory is not in a format we recognise.
    #[error("{}: {message}", path.display())]
    UnknownFormat { path: PathBuf, message: String },
    /// A path the catalog walker does not read: a symlink leaving the catalog, a FIFO,
    /// socket or device, or a walk limit (see `walk`).
    #[error("{0}")]
    Refused(Box<Problem>),
    /// The catalog content breaks one or more rules; every problem is listed.
    #[error("{}", Invalid::render(.0))]
    Invalid(Vec<Problem>),
}

struct Invalid;
impl Invalid {
    fn render(problems: &[Problem]) -> String {
        let mut out = format!(
            "catalog is invalid ({} problem{}):",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for p in problems {
            out.push_str("\n  - ");
            out.push_str(&p.to_string());
        }
        out
    }
}

impl CatalogError {
    /// PascalCase category, used as metric label and Event reason.
    pub fn category(&self) -> &'static str {
        match self {
            CatalogError::Io { .. } => "CatalogUnreadable",
            CatalogError::Parse { .. } => "CatalogParseError",
            CatalogError::TooLarge { .. } => "CatalogTooLarge",
            CatalogError::UnknownFormat { .. } => "CatalogUnknownFormat",
            CatalogError::Refused(_) => "CatalogPathRefused",
            CatalogError::Invalid(_) => "CatalogInvalid",
        }
    }

    /// Whether retrying the same operation could succeed without anyone editing the
    /// catalog (I/O hiccups yes; content errors no).
    pub fn is_retryable(&self) -> bool {
        matches!(self, CatalogError::Io { .. })
    }

    /// The problems, for `Invalid`; a single synthesized problem otherwise.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            CatalogError::Invalid(p) => p.clone(),
            CatalogError::Refused(p) => vec![(**p).clone()],
            CatalogError::Io { path, source } => {
                vec![Problem::new(format!("cannot read: {source}")).file(Some(path))]
            }
            CatalogError::Parse { path, message }
            | CatalogError::TooLarge { path, message }
            | CatalogError::UnknownFormat { path, message } => {
                vec![Problem::new(message.clone()).file(Some(path))]
            }
        }
    }
}
