//! Pure decisions of the CatalogSource controller: which source the spec names, whether the
//! content must be read now, and the status.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use olm_api::v1alpha1::catalog_source::{
    CatalogSource, CatalogSourceReason, CatalogSourceStatus, ConfigMapResourceReference, GrpcConnectionState, RegistryServiceStatus,
};
use olm_catalog_client::location::retry_delay;
use olm_catalog_client::{CatalogState, ConnectionState};

/// How often a ConfigMap catalog checks its ConfigMap for changes (one GET; no cluster-wide
/// ConfigMap watch just for legacy catalogs).
pub const CONFIGMAP_RECHECK: Duration = Duration::from_secs(5);

/// How often a catalog's pull secrets (its `spec.secrets` and its namespace's default
/// ServiceAccount's) are read again between content reads: a secret created or fixed after a
/// pull was refused takes effect within this, without OLM watching every Secret.
pub const SECRETS_RECHECK: Duration = Duration::from_secs(30);

/// How often a catalog server named by `spec.address` is checked for an answer between two
/// reads of its content (a connection, nothing read): upstream watches its gRPC connection's
/// state for the same reason.
pub const LIVENESS_RECHECK: Duration = Duration::from_secs(10);

/// When to read the content: `Some(Duration::ZERO)` means now.
pub fn next_fetch(state: Option<&CatalogState>, fingerprint: &str, interval: Duration, now: Timestamp) -> Duration {
    let Some(state) = state else {
        return Duration::ZERO;
    };
    if state.fingerprint != fingerprint {
        return Duration::ZERO;
    }
    let Some(last) = state.last_attempt else {
        return Duration::ZERO;
    };
    let wait = if state.connection == ConnectionState::Ready {
        interval
    } else {
        retry_delay(state.failures)
    };
    let elapsed = Duration::try_from(now.duration_since(last)).unwrap_or(Duration::ZERO);
    wait.saturating_sub(elapsed)
}

/// How long to put off reading a ConfigMap catalog whose ConfigMap changed, so that the read
/// falls in a later second than the change's `configMapReference.lastUpdateTime`. Status times
/// are whole seconds; a client (upstream's e2e suite among them) knows the new content is served
/// when `connectionState.lastConnect` is after `lastUpdateTime`, and a read in the same second
/// would never say so. Upstream records the change in one sync and serves it from a new pod in
/// a later one; this is the same order, at most a second later. `None`: read now. Only a
/// change counts: the first read of a catalog is not put off.
pub fn configmap_read_delay(catalog: &CatalogSource, inputs: &StatusInputs, previous: Option<&CatalogState>, fingerprint: &str, now: Timestamp) -> Option<Duration> {
    let (_, _, version) = inputs.configmap.as_ref()?;
    previous.filter(|p| p.fingerprint != fingerprint)?;
    let reference = catalog.status.as_ref().and_then(|s| s.config_map_reference.as_ref());
    let recorded = match reference.filter(|r| r.resource_version.as_deref() == Some(version.as_str())) {
        Some(r) => r.last_update_time.as_ref().map_or(now, |t| t.0),
        None => now,
    };
    if now.as_second() > recorded.as_second() {
        return None;
    }
    let into_second = u64::try_from(now.subsec_nanosecond()).unwrap_or(0);
    Some(Duration::from_nanos(1_000_000_000u64.saturating_sub(into_second)) + Duration::from_millis(20))
}

/// Observed facts for the status.
#[derive(Clone, Debug, Default)]
pub struct StatusInputs {
    /// The cache state after this reconcile's read (if any).
    pub state: Option<CatalogState>,
    /// The spec problem, if any (SpecInvalidError).
    pub spec_error: Option<String>,
    /// The interval problem, if any (InvalidIntervalError).
    pub interval_error: Option<String>,
    /// The ConfigMap problem, if any (ConfigMapError).
    pub configmap_error: Option<String>,
    /// The ConfigMap read (configmap mode): name, uid, resourceVersion.
    pub configmap: Option<(String, String, String)>,
    /// Pull secrets (`spec.secrets`) that are missing or unusable.
    pub secret_problems: Vec<String>,
    /// The address shown in `connectionState.address`.
    pub address: Option<String>,
    /// Whether the catalog polls (sets `latestImageRegistryPoll`).
    pub polls: bool,
    /// A ConfigMap catalog's registry pod, when OLM makes them (`registry_pod`).
    pub registry_pod: Option<super::registry_pod::Outcome>,
}

/// The full status.
pub fn status(catalog: &CatalogSource, inputs: &StatusInputs, now: Timestamp) -> CatalogSourceStatus {
    let previous = catalog.status.clone().unwrap_or_default();
    let namespace = catalog.metadata.namespace.clone().unwrap_or_default();
    let mut status = CatalogSourceStatus {
        conditions: previous.conditions.clone(),
        ..Default::default()
    };
    if let Some(message) = &inputs.spec_error {
        status.reason = Some(CatalogSourceReason::SpecInvalidError);
        status.message = Some(message.clone());
        return status;
    }
    if let Some((name, uid, version)) = &inputs.configmap {
        let changed = previous
            .config_map_reference
            .as_ref()
            .is_none_or(|r| r.resource_version.as_deref() != Some(version.as_str()));
        status.config_map_reference = Some(ConfigMapResourceReference {
            name: name.clone(),
            namespace: namespace.clone(),
            uid: Some(uid.clone()),
            resource_version: Some(version.clone()),
            last_update_time: if changed {
                Some(Time(now))
            } else {
                previous.config_map_reference.as_ref().and_then(|r| r.last_update_time.clone())
            },
        });
    }
    if let Some(state) = &inputs.state {
        status.connection_state = Some(GrpcConnectionState {
            address: inputs.address.clone(),
            last_observed_state: state.connection.as_str().to_owned(),
            last_connect: state.last_connect.map(Time),
        });
        if inputs.polls {
            status.latest_image_registry_poll = state.last_attempt.map(Time);
        }
        if let Some(error) = &state.last_error {
            status.reason = Some(if inputs.configmap.is_some() {
                CatalogSourceReason::ConfigMapError
            } else {
                CatalogSourceReason::RegistryServerError
            });
            status.message = Some(error.clone());
        }
    }
    if let Some(error) = &inputs.configmap_error {
        status.reason = Some(CatalogSourceReason::ConfigMapError);
        status.message = Some(error.clone());
    }
    if let Some(message) = &inputs.interval_error
        && status.reason.is_none()
    {
        status.reason = Some(CatalogSourceReason::InvalidIntervalError);
        status.message = Some(message.clone());
    }
    // Packages left out of a catalog that is otherwise served, and warnings about what is served.
    if status.message.is_none()
        && let Some(content) = inputs.state.as_ref().and_then(|s| s.content.as_ref())
        && !content.problems.is_empty()
    {
        let shown: Vec<&str> = content.problems.iter().take(5).map(String::as_str).collect();
        let more = content.problems.len().saturating_sub(shown.len());
        let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
        status.message = Some(format!("served, with problems: {}{more}", shown.join("; ")));
    }
    status.registry_service = registry_service(catalog, inputs, previous.registry_service.as_ref(), now);
    // A secret that cannot be used explains an Unauthorized pull, or warns before one; a
    // registry pod that could not be made is said too.
    let problems: Vec<&str> = inputs
        .secret_problems
        .iter()
        .map(String::as_str)
        .chain(inputs.registry_pod.as_ref().and_then(|p| p.problem.as_deref()))
        .collect();
    if !problems.is_empty() {
        let problems = problems.join("; ");
        status.message = Some(match status.message.take() {
            Some(message) => format!("{message}; {problems}"),
            None => problems,
        });
    }
    status
}

/// `status.registryService`, which clients (upstream's e2e suite among them) take as "the
/// catalog's registry exists": for a `spec.address` catalog at once, as upstream; for ConfigMap
/// and image catalogs once their content has been read (OLM serves them itself, no pod and
/// Service of their own, so only the protocol is named; a ConfigMap catalog's registry pod,
/// when OLM makes them, is named by its Service). An address of a cluster Service
/// (`name.namespace.svc[.cluster.local]:port`) is spelled out as its Service, so
/// that the status's address round-trips. `createdAt` is kept from the first time.
fn registry_service(catalog: &CatalogSource, inputs: &StatusInputs, previous: Option<&RegistryServiceStatus>, now: Timestamp) -> Option<RegistryServiceStatus> {
    let address = catalog.spec.address.as_deref().filter(|a| !a.is_empty() && catalog.spec.image.as_deref().is_none_or(str::is_empty));
    let read = inputs.state.as_ref().is_some_and(|s| s.content.is_some());
    if address.is_none() && !read {
        return None;
    }
    let mut service = RegistryServiceStatus {
        protocol: Some("grpc".into()),
        created_at: Some(previous.and_then(|p| p.created_at.clone()).unwrap_or(Time(now))),
        ..Default::default()
    };
    if inputs.registry_pod.as_ref().is_some_and(|p| p.service) {
        service.service_name = Some(catalog.metadata.name.clone().unwrap_or_default());
        service.service_namespace = catalog.metadata.namespace.clone();
        service.port = Some(super::registry_pod::GRPC_PORT.to_string());
    }
    if let Some((host, port)) = address.and_then(|a| a.rsplit_once(':')) {
        let host = host.strip_suffix(".cluster.local").unwrap_or(host);
        if let Some((name, namespace)) = host.strip_suffix(".svc").and_then(|h| h.split_once('.'))
            && !namespace.contains('.')
        {
            service.service_name = Some(name.to_owned());
            service.service_namespace = Some(namespace.to_owned());
            service.port = Some(port.to_owned());
        }
    }
    Some(service)
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::v1alpha1::catalog_source::DEFAULT_REGISTRY_POLL_INTERVAL;
    use olm_catalog_client::location::poll_interval;

    /// The CatalogSource `olm/community.v1` with the spec `spec` (JSON).
    fn catalog(spec: &str) -> CatalogSource {
        let spec: serde_json::Value = serde_json::from_str(spec).expect("spec is JSON");
        serde_json::from_value(serde_json::json!({"metadata": {"name": "community.v1", "namespace": "olm"}, "spec": spec}))
            .expect("a CatalogSource")
    }

    #[test]
    fn an_invalid_interval_falls_back_and_is_reported() {
        let c = catalog(r#"{"sourceType":"grpc","image":"i","updateStrategy":{"registryPoll":{"interval":"often"}}}"#);
        let (interval, error) = poll_interval(&c);
        assert_eq!(interval, DEFAULT_REGISTRY_POLL_INTERVAL);
        let error = error.expect("reported");
        let s = status(
            &c,
            &StatusInputs {
                interval_error: Some(error),
                ..Default::default()
            },
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(s.reason, Some(CatalogSourceReason::InvalidIntervalError));
        assert!(s.message.unwrap_or_default().contains("\"often\""));
    }

    fn state(connection: ConnectionState, failures: u32, at: i64) -> CatalogState {
        CatalogState {
            connection,
            content: None,
            last_error: None,
            last_error_category: None,
            last_connect: None,
            last_attempt: Some(Timestamp::from_second(at).expect("time")),
            failures,
            fingerprint: "a".into(),
        }
    }

    #[test]
    fn reads_are_due_on_change_on_interval_and_with_bounded_backoff() {
        let now = Timestamp::from_second(1000).expect("time");
        let interval = Duration::from_secs(600);
        assert_eq!(next_fetch(None, "a", interval, now), Duration::ZERO);
        let ready = state(ConnectionState::Ready, 0, 900);
        assert_eq!(next_fetch(Some(&ready), "a", interval, now), Duration::from_secs(500));
        assert_eq!(next_fetch(Some(&ready), "b", interval, now), Duration::ZERO, "address changed");
        let failing = state(ConnectionState::TransientFailure, 3, 999);
        assert_eq!(next_fetch(Some(&failing), "a", interval, now), Duration::from_secs(3));
    }

    #[test]
    fn a_changed_configmap_is_read_in_the_second_after_the_change_is_recorded() {
        let at = |second: i64, nanos: i32| Timestamp::new(second, nanos).expect("time");
        let mut c = catalog(r#"{"sourceType":"configmap","configMap":"cm"}"#);
        let inputs = StatusInputs {
            configmap: Some(("cm".into(), "uid".into(), "2".into())),
            ..Default::default()
        };
        let loaded = state(ConnectionState::Ready, 0, 10); // fingerprint "a"
        // The first read of a catalog, or a read of the content already loaded: now.
        assert_eq!(configmap_read_delay(&c, &inputs, None, "b", at(20, 0)), None);
        assert_eq!(configmap_read_delay(&c, &inputs, Some(&loaded), "a", at(20, 0)), None);
        // Changed, and not recorded yet: recorded now, read at the next second.
        let delay = configmap_read_delay(&c, &inputs, Some(&loaded), "b", at(20, 300_000_000)).expect("put off");
        assert_eq!(delay, Duration::from_millis(720));
        // Recorded (lastUpdateTime 20 s for resourceVersion 2): still put off within second 20,
        // read from second 21 on, so lastConnect (21) is after lastUpdateTime (20).
        c.status = Some(CatalogSourceStatus {
            config_map_reference: Some(ConfigMapResourceReference {
                name: "cm".into(),
                resource_version: Some("2".into()),
                last_update_time: Some(Time(at(20, 0))),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(configmap_read_delay(&c, &inputs, Some(&loaded), "b", at(20, 900_000_000)).is_some());
        assert_eq!(configmap_read_delay(&c, &inputs, Some(&loaded), "b", at(21, 20_000_000)), None);
        // Not a ConfigMap catalog: never put off.
        assert_eq!(configmap_read_delay(&c, &StatusInputs::default(), Some(&loaded), "b", at(20, 0)), None);
    }

    #[test]
    fn the_registry_service_is_named_for_addresses_at_once_and_for_read_catalogs() {
        let at = |spec: &str, state: Option<CatalogState>| {
            let c = catalog(spec);
            status(&c, &StatusInputs { state, ..Default::default() }, Timestamp::UNIX_EPOCH).registry_service
        };
        let service = at(r#"{"sourceType":"grpc","address":"olm-catalog.olm.svc:50051"}"#, None).expect("set for an address");
        assert_eq!(service.protocol.as_deref(), Some("grpc"));
        assert_eq!(
            (service.service_name.as_deref(), service.service_namespace.as_deref(), service.port.as_deref()),
            (Some("olm-catalog"), Some("olm"), Some("50051"))
        );
        let other = at(r#"{"sourceType":"grpc","address":"10.0.0.1:50051"}"#, None).expect("set for an address");
        assert_eq!(other.service_name, None, "not a Service address");
        assert_eq!(at(r#"{"sourceType":"configmap","configMap":"cm"}"#, None), None, "nothing read yet");
        let mut read = state(ConnectionState::Ready, 0, 10);
        let key = olm_resolver::CatalogKey::new("community.v1", "olm");
        let empty = olm_catalog_client::CatalogContent::from_documents(key, 0, Vec::new(), None, Default::default()).expect("an empty catalog");
        read.content = Some(std::sync::Arc::new(empty));
        let service = at(r#"{"sourceType":"configmap","configMap":"cm"}"#, Some(read.clone())).expect("set once read");
        assert_eq!((service.protocol.as_deref(), service.service_name), (Some("grpc"), None));

        // With a registry pod (`olm run --configmap-server-image`): its Service, as upstream's.
        let c = catalog(r#"{"sourceType":"configmap","configMap":"cm"}"#);
        let pod = |service, problem: Option<&str>| StatusInputs {
            state: Some(read.clone()),
            registry_pod: Some(super::super::registry_pod::Outcome { service, problem: problem.map(str::to_owned) }),
            ..Default::default()
        };
        let s = status(&c, &pod(true, None), Timestamp::UNIX_EPOCH);
        let service = s.registry_service.expect("set");
        assert_eq!(
            (service.service_name.as_deref(), service.service_namespace.as_deref(), service.port.as_deref()),
            (Some("community.v1"), Some("olm"), Some("50051"))
        );
        let s = status(&c, &pod(false, Some("registry pod: cannot create its registry pod (image i): forbidden")), Timestamp::UNIX_EPOCH);
        assert_eq!(s.registry_service.and_then(|r| r.service_name), None);
        assert_eq!(s.message.as_deref(), Some("registry pod: cannot create its registry pod (image i): forbidden"));
    }

    #[test]
    fn status_reports_connection_state_and_errors() {
        let c = catalog(r#"{"sourceType":"grpc","address":"127.0.0.1:1"}"#);
        let mut failing = state(ConnectionState::TransientFailure, 1, 10);
        failing.last_error = Some("cannot connect to catalog 127.0.0.1:1: connection refused".into());
        let s = status(
            &c,
            &StatusInputs {
                state: Some(failing),
                address: Some("127.0.0.1:1".into()),
                ..Default::default()
            },
            Timestamp::UNIX_EPOCH,
        );
        let conn = s.connection_state.expect("connection state");
        assert_eq!(conn.last_observed_state, "TRANSIENT_FAILURE");
        assert_eq!(conn.address.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(s.reason, Some(CatalogSourceReason::RegistryServerError));
        assert!(s.message.unwrap_or_default().contains("connection refused"));
    }
}
