//! Registry credentials from pull secrets: the `.dockerconfigjson` of a
//! `kubernetes.io/dockerconfigjson` Secret (`{"auths": {host: {auth | username+password}}}`) and
//! the legacy `.dockercfg` (the same map without `auths`), matched to a registry host the way
//! the kubelet's credential keyring matches them.

use std::collections::BTreeMap;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde_json::Value;

/// Credentials by registry host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    by_host: BTreeMap<String, (String, String)>,
}

impl Credentials {
    /// No credentials: anonymous pulls.
    pub fn anonymous() -> Credentials {
        Credentials::default()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }

    /// Credentials for one host.
    pub fn with(mut self, host: &str, username: &str, password: &str) -> Credentials {
        self.by_host.insert(normalize_host(host), (username.to_owned(), password.to_owned()));
        self
    }

    /// Parse a `.dockerconfigjson` or `.dockercfg` document. `origin` names it in errors.
    pub fn parse_docker_config(origin: &str, bytes: &[u8]) -> Result<Credentials, String> {
        let doc: Value = serde_json::from_slice(bytes)
            .map_err(|err| format!("{origin} is not a Docker config (JSON): {err}"))?;
        let auths = doc.get("auths").unwrap_or(&doc);
        let Some(auths) = auths.as_object() else {
            return Err(format!("{origin}: `auths` is not a map of registry hosts"));
        };
        let mut out = Credentials::default();
        for (host, entry) in auths {
            let field = |name: &str| entry.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
            let pair = if let Some(auth) = field("auth") {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .map_err(|err| format!("{origin}: the `auth` of {host} is not base64: {err}"))?;
                let text = String::from_utf8(decoded).map_err(|_| format!("{origin}: the `auth` of {host} is not text"))?;
                let Some((user, password)) = text.split_once(':') else {
                    return Err(format!("{origin}: the `auth` of {host} is not base64 of `username:password`"));
                };
                (user.to_owned(), password.to_owned())
            } else if let (Some(user), Some(password)) = (field("username"), field("password")) {
                (user.to_owned(), password.to_owned())
            } else {
                // An entry with only an identity token or an email: nothing we can send.
                continue;
            };
            out.by_host.insert(normalize_host(host), pair);
        }
        Ok(out)
    }

    /// Add `other`'s credentials; existing hosts keep theirs (the first secret listed wins).
    pub fn merge(&mut self, other: Credentials) {
        for (host, pair) in other.by_host {
            self.by_host.entry(host).or_insert(pair);
        }
    }

    /// What to send to `registry`.
    pub fn for_registry(&self, registry: &str) -> RegistryAuth {
        match self.by_host.get(&normalize_host(registry)) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

/// A host as a key: no scheme, no path, lower case, Docker Hub's aliases as one.
fn normalize_host(host: &str) -> String {
    let host = host.trim();
    let host = host
        .strip_prefix("https://")
        .or_else(|| host.strip_prefix("http://"))
        .unwrap_or(host);
    let host = host.split('/').next().unwrap_or(host).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io".to_owned(),
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerconfigjson_auth_and_username_password_are_both_read() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        let doc = format!(
            r#"{{"auths": {{"https://Registry.Example:5000/v2/": {{"auth": "{auth}"}},
                 "https://index.docker.io/v1/": {{"username": "bob", "password": "pw"}},
                 "token.only": {{"identitytoken": "x"}}}}}}"#
        );
        let creds = Credentials::parse_docker_config("secret ns/pull", doc.as_bytes()).unwrap();
        assert_eq!(
            creds.for_registry("registry.example:5000"),
            RegistryAuth::Basic("alice".into(), "s3cret".into())
        );
        assert_eq!(creds.for_registry("docker.io"), RegistryAuth::Basic("bob".into(), "pw".into()));
        assert_eq!(creds.for_registry("token.only"), RegistryAuth::Anonymous);
        assert_eq!(creds.for_registry("other:5000"), RegistryAuth::Anonymous);
    }

    #[test]
    fn legacy_dockercfg_and_bad_documents() {
        let creds =
            Credentials::parse_docker_config("cfg", br#"{"quay.io": {"username": "u", "password": "p"}}"#).unwrap();
        assert_eq!(creds.for_registry("quay.io"), RegistryAuth::Basic("u".into(), "p".into()));
        let err = Credentials::parse_docker_config("secret ns/bad", b"{\"auths\": {\"r\": {\"auth\": \"!!\"}}}").unwrap_err();
        assert!(err.contains("secret ns/bad") && err.contains("base64"), "{err}");
        let err = Credentials::parse_docker_config("secret ns/bad", b"not json").unwrap_err();
        assert!(err.contains("not a Docker config"), "{err}");
    }
}
