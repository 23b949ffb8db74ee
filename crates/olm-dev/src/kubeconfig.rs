//! Pointing clients at the local cluster: the admin kubeconfig and the shell environment.

use std::process::{Command, Stdio};

use base64::Engine as _;

use crate::error::{DevError, Result};
use crate::layout::{Layout, write_private};
use crate::pki;
use crate::run::{describe, shell_quote};

/// The admin kubeconfig, with the certificates embedded so the file works when copied.
fn kubeconfig_yaml(layout: &Layout) -> Result<String> {
    let b64 = |name: &str| -> Result<String> {
        let path = layout.pki_file(name);
        let bytes = std::fs::read(&path).map_err(|e| DevError::io("read", &path, e))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    Ok(format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: olm-dev
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: olm-dev
  context:
    cluster: olm-dev
    user: {user}
current-context: olm-dev
preferences: {{}}
"#,
        server = layout.apiserver_url(),
        ca = b64("ca.crt")?,
        user = pki::ADMIN_USER,
        cert = b64("admin.crt")?,
        key = b64("admin.key")?,
    ))
}

/// Writes the admin kubeconfig, readable only by its owner (it embeds the admin key).
pub(crate) fn write_kubeconfig(layout: &Layout) -> Result<()> {
    write_private(&layout.kubeconfig(), &kubeconfig_yaml(layout)?)
}

/// Shell lines that point `kubectl` at the local cluster: `eval "$(olm dev cluster env)"`.
pub fn env_lines(layout: &Layout) -> String {
    format!(
        "export KUBECONFIG={}\nexport PATH={}:\"$PATH\"\n",
        shell_quote(&layout.kubeconfig().display().to_string()),
        shell_quote(&layout.k8s_bin_dir().display().to_string()),
    )
}

/// Runs the built kubectl against the local cluster; returns stdout, or stderr as the error.
pub fn kubectl(
    layout: &Layout,
    args: &[&str],
    stdin: Option<&str>,
) -> std::result::Result<String, String> {
    use std::io::Write;
    let mut cmd = Command::new(layout.kubectl());
    cmd.arg(format!("--kubeconfig={}", layout.kubeconfig().display()))
        .arg("--request-timeout=15s")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let command = describe(&cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{command}`: {e}"))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())
            .map_err(|e| format!("cannot write to `{command}`: {e}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("`{command}` failed: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`{command}` exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::test_layout as layout;
    use std::path::Path;

    #[test]
    fn env_lines_quote_paths() {
        let l = layout(Path::new("/tmp/with space"));
        let text = env_lines(&l);
        assert_eq!(
            text,
            "export KUBECONFIG='/tmp/with space/state/kubeconfig'\nexport PATH='/tmp/with space/cache/bin/k8s-v1.36.3':\"$PATH\"\n"
        );
    }


    #[test]
    fn kubeconfig_embeds_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let l = layout(dir.path());
        pki::ensure_pki(&l).unwrap();
        let yaml = kubeconfig_yaml(&l).unwrap();
        assert!(yaml.contains("server: https://127.0.0.1:28443"), "{yaml}");
        assert!(yaml.contains("client-key-data: "), "{yaml}");
        assert!(
            !yaml.contains("BEGIN"),
            "PEM must be base64-encoded: {yaml}"
        );
    }
}
