//! The Helm chart `olm release` writes beside the release pair: manifests/ (compiled in) with the
//! values people change made into template values — namespace, image, replicas, resources,
//! leader election, the bundled catalog. Made from the manifests of this binary, never kept
//! beside them, so the two cannot drift: with the default values the chart renders exactly
//! manifests/ (tests/tests/helm_chart.rs renders it with helm and compares).

use std::path::Path;

use anyhow::Context;

use super::manifests::{MANIFEST_IMAGE, MANIFESTS};

/// The chart's `values.yaml`: every value with its default (what manifests/ says) and why one
/// would change it.
const VALUES: &str = r#"# Values of the olm-rs chart. With these defaults the chart renders exactly manifests/ of the
# `olm` binary that wrote it.

# Where OLM runs; also the global catalog namespace (CatalogSources there serve every namespace).
namespace: olm
# Where operators installed for all namespaces run (its OperatorGroup selects every namespace).
operatorsNamespace: operators

# The OLM image every Deployment runs (`olm run`, `olm catalog serve`, `olm packageserver`).
image: ghcr.io/olm-rs/olm:latest
imagePullPolicy: IfNotPresent

# The controllers (`olm run`). Two replicas need leader election: only the replica holding the
# Lease acts. Without leader election, run one replica.
controllers:
  replicas: 2
  leaderElection: true
  resources:
    requests:
      cpu: 20m
      memory: 64Mi
    limits:
      memory: 512Mi

# The package server (the PackageManifest API behind `kubectl get packagemanifests`).
packageserver:
  replicas: 2
  resources:
    requests:
      cpu: 10m
      memory: 64Mi
    limits:
      memory: 512Mi

# The bundled catalog: the catalog server serving the image's catalog, and the CatalogSource
# `community` in the OLM namespace that points at it. Disable it to bring catalogs of your own.
catalog:
  enabled: true
  pollInterval: 10m
  replicas: 2
  resources:
    requests:
      cpu: 10m
      memory: 32Mi
    limits:
      memory: 256Mi
"#;

/// Which values block a manifest's Deployment reads its replicas and resources from.
fn component_of(file: &str) -> Option<&'static str> {
    match file {
        "10-catalog-server.yaml" => Some("catalog"),
        "11-controllers.yaml" => Some("controllers"),
        "12-packageserver.yaml" => Some("packageserver"),
        _ => None,
    }
}

/// The names in manifests/ that become values: the OLM namespace where a line names it.
fn namespaced(line: &str) -> String {
    let ns = "{{ .Values.namespace }}";
    let line = line
        .replace("olm-catalog.olm.svc", &format!("olm-catalog.{ns}.svc"))
        .replace("packageserver.olm.svc", &format!("packageserver.{ns}.svc"))
        .replace("olm-clustercatalogs.olm.svc", &format!("olm-clustercatalogs.{ns}.svc"))
        .replace("--namespace=olm", &format!("--namespace={ns}"))
        .replace("--global-namespace=olm", &format!("--global-namespace={ns}"))
        .replace("--serving-cert-secret=olm/", &format!("--serving-cert-secret={ns}/"))
        .replace(MANIFEST_IMAGE, "{{ .Values.image }}")
        .replace("imagePullPolicy: IfNotPresent", "imagePullPolicy: {{ .Values.imagePullPolicy }}");
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    match trimmed {
        "namespace: olm" | "value: olm" | "- olm" => format!("{indent}{}{ns}", &trimmed[..trimmed.len() - 3]),
        "namespace: operators" => format!("{indent}namespace: {{{{ .Values.operatorsNamespace }}}}"),
        _ => line,
    }
}

/// One manifest as a template.
pub fn template(file: &str, text: &str) -> String {
    let component = component_of(file);
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let pad = " ".repeat(indent);
        match (component, trimmed) {
            (_, "name: olm") if file == "00-namespaces.yaml" => out.push(format!("{pad}name: {{{{ .Values.namespace }}}}")),
            (_, "name: operators") if file == "00-namespaces.yaml" => {
                out.push(format!("{pad}name: {{{{ .Values.operatorsNamespace }}}}"))
            }
            (Some(c), "replicas: 2") => out.push(format!("{pad}replicas: {{{{ .Values.{c}.replicas }}}}")),
            (Some(c), "resources:") => {
                while lines.peek().is_some_and(|next| next.len() - next.trim_start().len() > indent) {
                    lines.next();
                }
                out.push(format!("{pad}resources:"));
                out.push(format!("{pad}  {{{{- toYaml .Values.{c}.resources | nindent {} }}}}", indent + 2));
            }
            (Some("controllers"), "- --leader-elect" | "- --lease-name=olm-operator-lock") => {
                out.push(format!("{pad}{{{{- if .Values.controllers.leaderElection }}}}"));
                out.push(line.to_owned());
                out.push(format!("{pad}{{{{- end }}}}"));
            }
            (_, "interval: 10m") if file == "20-catalogsource.yaml" => out.push(format!("{pad}interval: {{{{ .Values.catalog.pollInterval }}}}")),
            _ => out.push(namespaced(line)),
        }
    }
    let mut body = out.join("\n");
    body.push('\n');
    match file {
        "10-catalog-server.yaml" | "20-catalogsource.yaml" => format!("{{{{- if .Values.catalog.enabled }}}}\n{body}{{{{- end }}}}\n"),
        "11-controllers.yaml" => format!(
            "{{{{- if and (not .Values.controllers.leaderElection) (gt (int .Values.controllers.replicas) 1) }}}}\n\
             {{{{- fail \"controllers.replicas > 1 needs controllers.leaderElection: without it every replica acts at once; set controllers.replicas to 1\" }}}}\n\
             {{{{- end }}}}\n{body}"
        ),
        _ => body,
    }
}

/// Write the chart into `dir`: Chart.yaml, values.yaml, one template per manifest, and the
/// CRDs in crds/ (Helm installs those first and never templates or deletes them).
/// `image` is the default of the `image` value.
pub fn write(dir: &Path, crds: &str, image: &str) -> anyhow::Result<()> {
    let version = env!("CARGO_PKG_VERSION");
    let chart = format!(
        "apiVersion: v2\nname: olm-rs\ndescription: Operator Lifecycle Manager (operators.coreos.com), in Rust\n\
         type: application\nversion: {version}\nappVersion: \"{version}\"\n"
    );
    let mut files = vec![
        ("Chart.yaml".to_owned(), chart),
        ("values.yaml".to_owned(), VALUES.replace(MANIFEST_IMAGE, image)),
        ("crds/crds.yaml".to_owned(), crds.to_owned()),
    ];
    for (name, text) in MANIFESTS {
        files.push((format!("templates/{name}"), template(name, text)));
    }
    for (name, text) in files {
        let path = dir.join(&name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_values_people_change_are_template_values_and_no_olm_namespace_is_left() {
        for (name, text) in MANIFESTS {
            let template = template(name, text);
            for line in template.lines().filter(|l| !l.trim_start().starts_with('#')) {
                let value = line.trim();
                assert!(
                    !matches!(value, "namespace: olm" | "- olm" | "value: olm" | "namespace: operators" | "replicas: 2")
                        && !value.contains(".olm.svc")
                        && !value.ends_with("=olm")
                        && !value.contains("=olm/")
                        && !value.contains(MANIFEST_IMAGE),
                    "{name}: {line:?} is not made a value"
                );
            }
        }
        let controllers = template("11-controllers.yaml", MANIFESTS[6].1);
        assert!(controllers.contains("replicas: {{ .Values.controllers.replicas }}"), "{controllers}");
        assert!(controllers.contains("{{- toYaml .Values.controllers.resources | nindent 10 }}"), "{controllers}");
        assert!(controllers.contains("{{- if .Values.controllers.leaderElection }}\n        - --leader-elect\n"), "{controllers}");
        assert!(controllers.contains("fail "), "two replicas without leader election is refused");
        let catalog = template("20-catalogsource.yaml", MANIFESTS[8].1);
        assert!(catalog.starts_with("{{- if .Values.catalog.enabled }}"), "{catalog}");
        assert!(catalog.contains("address: olm-catalog.{{ .Values.namespace }}.svc:50051"), "{catalog}");
    }
}
