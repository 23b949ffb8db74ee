//! Registry pods of ConfigMap catalogs, when asked for (`olm run --configmap-server-image`), as
//! upstream's catalog operator makes them: a pod serving the ConfigMap over operator-registry's
//! gRPC API (`olm catalog serve` on the ConfigMap mounted as a volume), labelled
//! `olm.catalogSource` and `olm.configMapResourceVersion` and replaced when the ConfigMap changes,
//! and a Service of the catalog's name, which `status.registryService` names. OLM still reads
//! the ConfigMap itself (resolution never waits for the pod): the pod is for what dials the
//! catalog (a grpc CatalogSource with the Service's address, `grpcurl`) and for scripts that
//! wait on it. Without the option no pod is made (lighter; the difference is in
//! docs/catalog-operator.md).
//!
//! Looked at on every pass of a ConfigMap catalog (every `CONFIGMAP_RECHECK`): one list of its
//! pods and one read of its Service, no cluster-wide pod watch.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, GRPCAction, Pod, PodSecurityContext, PodSpec, Probe,
    ResourceRequirements, SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use olm_api::v1alpha1::catalog_source::CatalogSource;
use olm_runtime::ControllerContext;

use super::state::CatalogSourceState;

/// Label of a catalog's registry pods and Service: the CatalogSource's name (upstream's).
pub const CATALOG_LABEL: &str = "olm.catalogSource";
/// Label of a registry pod: the resourceVersion of the ConfigMap it serves (upstream's).
pub const CONFIGMAP_VERSION_LABEL: &str = "olm.configMapResourceVersion";
/// The gRPC port of the pod and its Service (upstream's).
pub const GRPC_PORT: i32 = 50051;
const CONTAINER: &str = "configmap-registry-server";
const MOUNT: &str = "/registry";

/// What the pass saw: the ConfigMap served and the catalog's pods and Service.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The ConfigMap's name and resourceVersion.
    pub configmap: (String, String),
    /// The image of registry pods.
    pub image: String,
    /// The catalog's registry pods.
    pub pods: Vec<PodView>,
    /// The Service of the catalog's name: `Some(true)` when it is this catalog's.
    pub service_is_ours: Option<bool>,
}

/// A registry pod as far as [`decide`] cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    /// Name.
    pub name: String,
    /// Its `olm.configMapResourceVersion`.
    pub version: Option<String>,
    /// Its container's image.
    pub image: Option<String>,
    /// Being deleted already.
    pub deleting: bool,
}

/// What to change.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A pod for the ConfigMap as it is now.
    CreatePod,
    /// A pod of an older ConfigMap or image, or a second one.
    DeletePod(String),
    /// The catalog's Service.
    CreateService,
}

/// One pod serving the ConfigMap as it is now with the configured image (older ones deleted at
/// once, as upstream), and the Service.
pub fn decide(o: &Observed) -> Vec<Action> {
    let (_, version) = &o.configmap;
    let mut actions = Vec::new();
    let mut kept = false;
    for pod in o.pods.iter().filter(|p| !p.deleting) {
        let current = pod.version.as_ref() == Some(version) && pod.image.as_ref() == Some(&o.image);
        if current && !kept {
            kept = true;
        } else {
            actions.push(Action::DeletePod(pod.name.clone()));
        }
    }
    if !kept {
        actions.insert(0, Action::CreatePod);
    }
    if o.service_is_ours.is_none() {
        actions.push(Action::CreateService);
    }
    actions
}

fn owner(catalog: &CatalogSource) -> Vec<OwnerReference> {
    catalog
        .controller_owner_ref(&())
        .map(|o| OwnerReference { block_owner_deletion: Some(false), ..o })
        .into_iter()
        .collect()
}

/// The registry pod serving `configmap` (name, resourceVersion) of `catalog` with `image` (the
/// olm image: its entrypoint is `olm`).
pub fn pod(catalog: &CatalogSource, configmap: &(String, String), image: &str) -> Pod {
    let name = catalog.name_any();
    let labels = BTreeMap::from([
        (CATALOG_LABEL.to_owned(), name.clone()),
        (CONFIGMAP_VERSION_LABEL.to_owned(), configmap.1.clone()),
    ]);
    let grpc_probe = |initial| Probe {
        grpc: Some(GRPCAction { port: GRPC_PORT, service: None }),
        initial_delay_seconds: Some(initial),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        ..Default::default()
    };
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: catalog.namespace(),
            labels: Some(labels),
            owner_references: Some(owner(catalog)),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_selector: Some(BTreeMap::from([("kubernetes.io/os".to_owned(), "linux".to_owned())])),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
                ..Default::default()
            }),
            containers: vec![Container {
                name: CONTAINER.into(),
                image: Some(image.to_owned()),
                args: Some(vec![
                    "catalog".into(),
                    "serve".into(),
                    format!("--catalog={name}={MOUNT}"),
                    format!("--grpc-addr=0.0.0.0:{GRPC_PORT}"),
                    "--http-addr=none".into(),
                    // The pod is replaced when the ConfigMap changes.
                    "--reload-interval=0".into(),
                ]),
                ports: Some(vec![ContainerPort { name: Some("grpc".into()), container_port: GRPC_PORT, ..Default::default() }]),
                readiness_probe: Some(grpc_probe(1)),
                liveness_probe: Some(grpc_probe(10)),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_owned(), Quantity("10m".into())),
                        ("memory".to_owned(), Quantity("50Mi".into())),
                    ])),
                    ..Default::default()
                }),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
                    ..Default::default()
                }),
                volume_mounts: Some(vec![VolumeMount { name: "catalog".into(), mount_path: MOUNT.into(), read_only: Some(true), ..Default::default() }]),
                ..Default::default()
            }],
            volumes: Some(vec![Volume {
                name: "catalog".into(),
                config_map: Some(ConfigMapVolumeSource { name: configmap.0.clone(), ..Default::default() }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The catalog's Service: its name, the gRPC port, its registry pods.
pub fn service_of(catalog: &CatalogSource) -> Service {
    let name = catalog.name_any();
    let labels = BTreeMap::from([(CATALOG_LABEL.to_owned(), name.clone())]);
    Service {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: catalog.namespace(),
            labels: Some(labels.clone()),
            owner_references: Some(owner(catalog)),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(labels),
            ports: Some(vec![ServicePort {
                name: Some("grpc".into()),
                port: GRPC_PORT,
                target_port: Some(IntOrString::Int(GRPC_PORT)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// What [`ensure`] left: whether the catalog's own Service is there (the status names it), and
/// what went wrong (a Service of that name that is someone else's, a write refused): said in
/// the CatalogSource's status, the catalog still served by OLM itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The catalog's Service exists and is its own.
    pub service: bool,
    /// What went wrong, for `status.message`.
    pub problem: Option<String>,
}

/// Observe, decide, act for the registry pod of `catalog` serving `configmap` (name,
/// resourceVersion). Nothing here fails the reconcile: what the API server refuses (a list, a
/// create) is said in the Outcome, and OLM serves the catalog meanwhile.
pub async fn ensure(
    ctx: &ControllerContext<CatalogSourceState>,
    catalog: &CatalogSource,
    configmap: (String, String),
    image: &str,
) -> Outcome {
    let namespace = catalog.namespace().unwrap_or_default();
    let name = catalog.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    let observed = match observe(&pods, &services, catalog, configmap.clone(), image).await {
        Ok(observed) => observed,
        Err((what, err)) => {
            tracing::warn!(catalog = %name, "cannot {what}: {err}");
            let problem = format!("registry pod: cannot {what}: {}", olm_runtime::error::api_message(&err));
            return Outcome { service: false, problem: Some(problem) };
        }
    };
    let mut problems = Vec::new();
    let mut service = observed.service_is_ours == Some(true);
    for action in decide(&observed) {
        let done = match &action {
            Action::CreatePod => pods.create(&PostParams::default(), &pod(catalog, &configmap, image)).await.map(|p| {
                tracing::info!(catalog = %name, pod = %p.name_any(), configmap_version = %configmap.1, "registry pod created");
            }),
            Action::DeletePod(pod) => match pods.delete(pod, &DeleteParams::background()).await {
                Err(err) if olm_runtime::error::is_not_found(&err) => Ok(()),
                other => other.map(|_| ()),
            },
            Action::CreateService => match services.create(&PostParams::default(), &service_of(catalog)).await {
                // Made by another pass meanwhile: the next pass sees whose it is.
                Err(err) if olm_runtime::error::api_status_code(&err) == Some(409) => Ok(()),
                other => other.map(|_| service = true),
            },
        };
        if let Err(err) = done {
            let what = match &action {
                Action::CreatePod => format!("cannot create its registry pod (image {image})"),
                Action::DeletePod(pod) => format!("cannot delete its old registry pod {pod}"),
                Action::CreateService => format!("cannot create its Service {name}"),
            };
            tracing::warn!(catalog = %name, "{what}: {err}");
            problems.push(format!("{what}: {}", olm_runtime::error::api_message(&err)));
        }
    }
    if observed.service_is_ours == Some(false) {
        problems.push(format!(
            "the Service {namespace}/{name} is not this catalog's, so its registry pod cannot be reached by the catalog's name: rename or delete that Service"
        ));
    }
    let problem = (!problems.is_empty()).then(|| format!("registry pod: {}", problems.join("; ")));
    Outcome { service, problem }
}

/// The catalog's registry pods and whether its Service is its own; what could not be read.
async fn observe(
    pods: &Api<Pod>,
    services: &Api<Service>,
    catalog: &CatalogSource,
    configmap: (String, String),
    image: &str,
) -> std::result::Result<Observed, (String, kube::Error)> {
    let name = catalog.name_any();
    let listed = pods
        .list(&ListParams::default().labels(&format!("{CATALOG_LABEL}={name}")))
        .await
        .map_err(|err| ("list its registry pods".to_owned(), err))?;
    let uid = catalog.uid();
    let ours = |meta: &ObjectMeta| meta.owner_references.iter().flatten().any(|o| Some(&o.uid) == uid.as_ref());
    let service_is_ours = services
        .get_opt(&name)
        .await
        .map_err(|err| (format!("read its Service {name}"), err))?
        .map(|s| ours(&s.metadata));
    Ok(Observed {
        configmap,
        image: image.to_owned(),
        pods: listed
            .items
            .iter()
            .filter(|p| ours(&p.metadata))
            .map(|p| PodView {
                name: p.name_any(),
                version: p.labels().get(CONFIGMAP_VERSION_LABEL).cloned(),
                image: p.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone()),
                deleting: p.metadata.deletion_timestamp.is_some(),
            })
            .collect(),
        service_is_ours,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(pods: Vec<PodView>, service: Option<bool>) -> Observed {
        Observed { configmap: ("cm".into(), "7".into()), image: "olm:1".into(), pods, service_is_ours: service }
    }

    fn view(name: &str, version: &str, image: &str) -> PodView {
        PodView { name: name.into(), version: Some(version.into()), image: Some(image.into()), deleting: false }
    }

    #[test]
    fn a_new_catalog_gets_a_pod_and_its_service() {
        assert_eq!(decide(&observed(vec![], None)), vec![Action::CreatePod, Action::CreateService]);
    }

    #[test]
    fn a_changed_configmap_or_image_replaces_the_pod_and_extra_pods_go() {
        assert_eq!(decide(&observed(vec![view("c-a", "7", "olm:1")], Some(true))), vec![]);
        assert_eq!(
            decide(&observed(vec![view("c-a", "6", "olm:1")], Some(true))),
            vec![Action::CreatePod, Action::DeletePod("c-a".into())]
        );
        assert_eq!(decide(&observed(vec![view("c-a", "7", "olm:0")], Some(true)))[0], Action::CreatePod);
        assert_eq!(
            decide(&observed(vec![view("c-a", "7", "olm:1"), view("c-b", "7", "olm:1")], Some(true))),
            vec![Action::DeletePod("c-b".into())]
        );
        // A pod already going is not deleted again, and does not count.
        let going = PodView { deleting: true, ..view("c-a", "7", "olm:1") };
        assert_eq!(decide(&observed(vec![going], Some(false))), vec![Action::CreatePod]);
    }

    #[test]
    fn the_pod_serves_the_mounted_configmap_and_carries_upstreams_labels() {
        let catalog: CatalogSource = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "legacy", "namespace": "team", "uid": "u-1"},
            "spec": {"sourceType": "configmap", "configMap": "legacy-configmap"}
        }))
        .expect("a CatalogSource");
        let pod = pod(&catalog, &("legacy-configmap".into(), "42".into()), "registry.local/olm:dev");
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!((labels[CATALOG_LABEL].as_str(), labels[CONFIGMAP_VERSION_LABEL].as_str()), ("legacy", "42"));
        let owner = &pod.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!((owner.uid.as_str(), owner.controller), ("u-1", Some(true)), "deleted with its catalog");
        let spec = pod.spec.expect("spec");
        let args = spec.containers[0].args.clone().unwrap_or_default();
        assert!(args.contains(&"--catalog=legacy=/registry".to_owned()), "{args:?}");
        assert_eq!(spec.volumes.unwrap()[0].config_map.as_ref().map(|c| c.name.as_str()), Some("legacy-configmap"));
        let service = service_of(&catalog);
        assert_eq!(service.spec.and_then(|s| s.selector).unwrap_or_default()[CATALOG_LABEL], "legacy");
    }
}
