//! Names OLM gives the objects it generates (RBAC from a CSV's permissions), as upstream does:
//! a base cut to fit, and a hash of what the object is for.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Kubernetes names are at most this long.
const MAX_NAME: usize = 63;

/// `base` cut so that `base-hash` fits in a Kubernetes name.
pub fn generated_name(base: &str, hashed: &Value) -> String {
    let digest = Sha256::digest(hashed.to_string().as_bytes());
    let hash = &hex::encode(digest)[..12];
    let keep = MAX_NAME - hash.len() - 1;
    let mut base = base.to_owned();
    if base.len() > keep {
        let mut cut = keep;
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base.truncate(cut);
    }
    format!("{}-{hash}", base.trim_end_matches(['-', '.']))
}


#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generated_names_fit_and_are_stable() {
        let long = "a".repeat(80);
        let name = generated_name(&long, &json!(1));
        assert_eq!(name.len(), MAX_NAME);
        assert_eq!(name, generated_name(&long, &json!(1)));
        assert_ne!(name, generated_name(&long, &json!(2)));
        assert!(generated_name("etcd-operator.", &json!(1)).starts_with("etcd-operator-"), "no dot before the hash");
    }
}
