//! Label selector matching (`metav1.LabelSelector` semantics).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` match `selector`. An empty selector matches everything; an unknown
/// operator matches nothing (the API server rejects such selectors anyway).
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let match_labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|expr| {
        let values = expr.values.as_deref().unwrap_or_default();
        match expr.operator.as_str() {
            "In" => labels.get(&expr.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&expr.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&expr.key),
            "DoesNotExist" => !labels.contains_key(&expr.key),
            _ => false,
        }
    });
    match_labels_ok && expressions_ok
}

/// Whether the selector has no requirement at all.
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn match_labels_and_expressions() {
        let labels: BTreeMap<String, String> = [("team".to_owned(), "a".to_owned())].into();
        let by_label = LabelSelector {
            match_labels: Some([("team".to_owned(), "a".to_owned())].into()),
            ..Default::default()
        };
        assert!(matches(&by_label, &labels));
        let not_in = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "team".into(),
                operator: "NotIn".into(),
                values: Some(vec!["a".into()]),
            }]),
            ..Default::default()
        };
        assert!(!matches(&not_in, &labels));
        assert!(matches(&LabelSelector::default(), &labels));
        assert!(is_empty(&LabelSelector::default()));
    }
}
