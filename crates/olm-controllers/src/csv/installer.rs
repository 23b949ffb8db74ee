//! Who writes what grants an operator something.
//!
//! The operator's Deployments, its Roles and RoleBindings (lifted to ClusterRoles for an
//! all-namespaces group, copied into the target namespaces of a multi-namespace one), the RBAC
//! of its serving certificates (auth delegation, the authentication reader in kube-system), its
//! APIServices, its webhook configurations and the conversion webhooks of its CRDs each give the
//! operator power over the cluster. When the namespace's OperatorGroup names a ServiceAccount
//! (`spec.serviceAccountName`), they are written as that ServiceAccount, so the API server's
//! authorization and RBAC escalation checks decide: no path grants the operator more than the
//! ServiceAccount holds. Otherwise OLM writes them. What grants nothing (serving certificate
//! Secrets and Services, the OperatorCondition, copies of the CSV, the aggregated roles of the
//! provided APIs, deletions) is written by OLM either way.

use kube::ResourceExt;
use olm_api::keys;
use olm_api::v1::operator_group::OperatorGroup;
use olm_api::v1alpha1::cluster_service_version::ClusterServiceVersion;
use olm_runtime::{ControllerContext, Error, Result};

use super::state::CsvState;
use crate::scoped_client::{ScopedClients, ServiceAccountRef};

/// The identity the install writes of one CSV go out as.
pub(super) struct Installer {
    /// The client, or why none can be made (a group naming a ServiceAccount that is missing).
    client: std::result::Result<kube::Client, String>,
    /// The namespace of the operator's group.
    home: String,
    /// The ServiceAccount, when the group names one.
    service_account: Option<ServiceAccountRef>,
}

impl Installer {
    /// Who installs `csv`: the identity of its operator's namespace (a copy's is the
    /// original's, `olm.operatorNamespace`), decided by the groups there.
    pub(super) fn of(ctx: &ControllerContext<CsvState>, csv: &ClusterServiceVersion) -> Self {
        let own = csv.namespace().unwrap_or_default();
        let home = if csv.is_copied() {
            csv.annotations().get(keys::OPERATOR_NAMESPACE_ANNOTATION).cloned().unwrap_or(own)
        } else {
            own
        };
        let groups = ctx.state.groups.list_in(&home);
        let groups: Vec<&OperatorGroup> = groups.iter().map(AsRef::as_ref).collect();
        let (client, service_account) = match ScopedClients::new(ctx.client.clone()).for_workloads(&home, &groups) {
            Ok((client, service_account)) => (Ok(client), service_account),
            Err(err) => (Err(err.to_string()), None),
        };
        Self {
            client,
            home,
            service_account,
        }
    }

    /// OLM itself, whoever the group names: for what grants the operator nothing.
    pub(super) fn olm(ctx: &ControllerContext<CsvState>) -> Self {
        Self {
            client: Ok(ctx.client.clone()),
            home: String::new(),
            service_account: None,
        }
    }

    /// The client to write with; an error names the group and what to change.
    pub(super) fn client(&self) -> Result<kube::Client> {
        self.client.clone().map_err(|message| Error::InvalidObject {
            kind: "OperatorGroup",
            name: self.home.clone(),
            message,
        })
    }

    /// " as ServiceAccount ns/name (OperatorGroup og)" for messages about a write, or nothing
    /// when OLM writes itself.
    pub(super) fn as_whom(&self) -> String {
        self.service_account
            .as_ref()
            .map(|sa| format!(" as {sa} (spec.serviceAccountName of OperatorGroup {}/{})", sa.namespace, sa.group))
            .unwrap_or_default()
    }
}
