//! Values quoted in messages: a catalog may carry a 13 MB package name or a 40 KB rule, and
//! echoing it whole buries the one sentence the user needs. Every message that quotes a
//! value from input quotes it through [`quoted`].

/// How many characters of a value a message shows.
pub const MAX_QUOTED_CHARS: usize = 200;

/// `value` in double quotes (escaped like Rust's `{:?}`), cut to [`MAX_QUOTED_CHARS`]
/// characters with how much was left out.
pub fn quoted(value: &str) -> String {
    let total = value.chars().count();
    if total <= MAX_QUOTED_CHARS {
        return format!("{value:?}");
    }
    let head: String = value.chars().take(MAX_QUOTED_CHARS).collect();
    format!("{head:?}… ({} more characters)", total - MAX_QUOTED_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole_and_long_ones_cut() {
        assert_eq!(quoted("etcd"), "\"etcd\"");
        let long = "x".repeat(13_000_000);
        let q = quoted(&long);
        assert!(q.len() < 300, "{}", q.len());
        assert!(q.ends_with("… (12999800 more characters)"), "{q}");
    }
}
