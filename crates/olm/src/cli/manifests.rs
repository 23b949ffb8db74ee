//! manifests/ compiled into the binary: what `olm release` writes (as the release pair and as the
//! Helm chart, `chart`) and what `olm dev up` applies of it.

/// The image manifests/ names; `--image` replaces it.
pub const MANIFEST_IMAGE: &str = "ghcr.io/olm-rs/olm:latest";

/// The roles people get for OLM's kinds in their namespaces (aggregated into admin, edit,
/// view); `olm dev up` applies them too.
pub const USER_ROLES: &str = include_str!("../../../../manifests/04-rbac-users.yaml");

/// manifests/*.yaml, in the order they are applied (their names sort that way).
pub const MANIFESTS: &[(&str, &str)] = &[
    ("00-namespaces.yaml", include_str!("../../../../manifests/00-namespaces.yaml")),
    ("01-rbac-controllers.yaml", include_str!("../../../../manifests/01-rbac-controllers.yaml")),
    ("02-rbac-packageserver.yaml", include_str!("../../../../manifests/02-rbac-packageserver.yaml")),
    ("03-rbac-catalog.yaml", include_str!("../../../../manifests/03-rbac-catalog.yaml")),
    ("04-rbac-users.yaml", USER_ROLES),
    ("10-catalog-server.yaml", include_str!("../../../../manifests/10-catalog-server.yaml")),
    ("11-controllers.yaml", include_str!("../../../../manifests/11-controllers.yaml")),
    ("12-packageserver.yaml", include_str!("../../../../manifests/12-packageserver.yaml")),
    ("20-catalogsource.yaml", include_str!("../../../../manifests/20-catalogsource.yaml")),
    ("21-operatorgroups.yaml", include_str!("../../../../manifests/21-operatorgroups.yaml")),
    ("22-olmconfig.yaml", include_str!("../../../../manifests/22-olmconfig.yaml")),
];
