//! A bundle object with fields the cluster's schema for its kind does not declare (a CRD older
//! than the bundle: loki-operator's ServiceMonitor against prometheus-operator 0.56's CRD).
//! Server-side apply refuses the whole object, whatever its field validation; upstream creates
//! it and the API server drops what the schema does not declare. OLM writes it the same way,
//! and the InstallPlan's Event names what was left out.

use kube::Api;
use kube::api::{DynamicObject, PostParams};
use olm_runtime::events::EventNote;
use serde_json::Value;

const UNDECLARED: &str = ": field not declared in schema";

/// The fields a refused server-side apply names as not in the schema (`.spec.x`), or None when
/// the refusal is for anything else. (The API server answers 500 Internal Server Error for it.)
pub fn undeclared_fields(err: &kube::Error) -> Option<Vec<String>> {
    let kube::Error::Api(status) = err else { return None };
    if !status.message.contains("failed to create typed patch object") {
        return None;
    }
    let fields: Vec<String> = status
        .message
        .split(UNDECLARED)
        .filter_map(|before| before.rsplit([' ', '\n']).next())
        .filter(|path| path.starts_with('.'))
        .map(str::to_owned)
        .collect();
    (!fields.is_empty()).then_some(fields)
}

/// Write `manifest` as `name` without server-side apply: created when absent, else replaced
/// (its resourceVersion the current one). Both drop what the schema does not declare. Returns
/// the object and whether it was created.
pub async fn write(api: &Api<DynamicObject>, name: &str, manifest: &Value, field_manager: &str) -> Result<(DynamicObject, bool), kube::Error> {
    let mut object: DynamicObject = serde_json::from_value(manifest.clone()).map_err(kube::Error::SerdeError)?;
    let params = PostParams { field_manager: Some(field_manager.to_owned()), ..Default::default() };
    match api.get_opt(name).await? {
        None => Ok((api.create(&params, &object).await?, true)),
        Some(current) => {
            object.metadata.resource_version = current.metadata.resource_version;
            Ok((api.replace(name, &params, &object).await?, false))
        }
    }
}

/// The InstallPlan's Event for `step` (described), an object of `kind` written without
/// `fields`.
pub fn note(step: &str, kind: &str, api_version: &str, fields: &[String]) -> EventNote {
    EventNote::warning(
        "FieldsNotInSchema",
        "Install",
        format!(
            "{step}: the cluster's schema for {kind} ({api_version}) does not declare {}; it was written without them, as upstream writes it (update the CRD of {kind} if the operator needs them)",
            fields.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::undeclared_fields;
    use kube::core::Status;

    fn refused(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, "BadRequest").with_code(code).boxed())
    }

    #[test]
    fn the_fields_a_refused_apply_names_are_read_from_its_message() {
        // The API server's words for loki-operator 0.11.0's ServiceMonitor.
        let one = refused(500, "failed to create typed patch object (ns/loki-operator-metrics-monitor; monitoring.coreos.com/v1, Kind=ServiceMonitor): .spec.serviceDiscoveryRole: field not declared in schema");
        assert_eq!(undeclared_fields(&one), Some(vec![".spec.serviceDiscoveryRole".to_owned()]));
        let two = refused(500, "failed to create typed patch object (ns/m; example.com/v1, Kind=Monitor): errors:\n  .spec.a: field not declared in schema\n  .spec.b.c: field not declared in schema");
        assert_eq!(undeclared_fields(&two), Some(vec![".spec.a".to_owned(), ".spec.b.c".to_owned()]));
        assert_eq!(undeclared_fields(&refused(400, "Service \"x\" is invalid: spec.ports: Required value")), None);
        assert_eq!(undeclared_fields(&refused(500, "etcdserver: request timed out")), None);
    }
}
