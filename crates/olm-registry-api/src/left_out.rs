//! Packages a catalog server left out of its catalog for their problems, told to gRPC clients
//! beside the `ListPackages` answer: operator-registry's API has no field for it, so it goes in
//! the response's binary metadata `olm-left-out-bin` (JSON `[{package, problems}]`), which
//! `opm`'s clients ignore. Bounded: a header, not a second catalog.

use std::collections::BTreeMap;

use tonic::metadata::{BinaryMetadataValue, MetadataMap};

/// The metadata key.
pub const LEFT_OUT_METADATA: &str = "olm-left-out-bin";
/// At most this many bytes of JSON (HTTP/2 header lists are commonly limited to 16 KiB).
const MAX_BYTES: usize = 8 << 10;
/// At most this many characters of problems per package.
const MAX_WHY: usize = 600;

/// Put `left_out` (package → its problems) into `metadata`, as many packages as fit.
pub fn insert(metadata: &mut MetadataMap, left_out: &BTreeMap<String, Vec<String>>) {
    if left_out.is_empty() {
        return;
    }
    let mut entries = Vec::new();
    let mut size = 2;
    for (package, problems) in left_out {
        let mut why = problems.join("; ");
        if why.chars().count() > MAX_WHY {
            why = why.chars().take(MAX_WHY).collect::<String>() + "…";
        }
        let entry = serde_json::json!({"package": package, "problems": [why]});
        let length = entry.to_string().len() + 1;
        if size + length > MAX_BYTES {
            break;
        }
        size += length;
        entries.push(entry);
    }
    let bytes = serde_json::Value::Array(entries).to_string().into_bytes();
    metadata.insert_bin(LEFT_OUT_METADATA, BinaryMetadataValue::from_bytes(&bytes));
}

/// Read what [`insert`] put: package → why (its problems joined). Absent or unreadable: none.
pub fn read(metadata: &MetadataMap) -> BTreeMap<String, String> {
    let Some(bytes) = metadata.get_bin(LEFT_OUT_METADATA).and_then(|v| v.to_bytes().ok()) else {
        return BTreeMap::new();
    };
    let Ok(serde_json::Value::Array(entries)) = serde_json::from_slice(&bytes) else {
        return BTreeMap::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let package = entry["package"].as_str()?;
            let problems: Vec<&str> = entry["problems"].as_array()?.iter().filter_map(|p| p.as_str()).collect();
            Some((package.to_owned(), problems.join("; ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn left_out_packages_round_trip_within_the_bound() {
        let mut metadata = MetadataMap::new();
        let left_out = BTreeMap::from([
            ("bad".to_owned(), vec!["channel \"x\" has 2 heads".to_owned(), "icon is not base64".to_owned()]),
            ("worse".to_owned(), vec!["é".repeat(2000)]),
        ]);
        insert(&mut metadata, &left_out);
        let told = read(&metadata);
        assert_eq!(told["bad"], "channel \"x\" has 2 heads; icon is not base64");
        assert_eq!(told["worse"].chars().count(), MAX_WHY + 1, "cut, with an ellipsis");

        let many: BTreeMap<String, Vec<String>> = (0..1000).map(|i| (format!("package-{i:04}"), vec!["x".repeat(100)])).collect();
        let mut metadata = MetadataMap::new();
        insert(&mut metadata, &many);
        let told = read(&metadata);
        assert!(!told.is_empty() && told.len() < 1000, "{}", told.len());
        assert!(metadata.get_bin(LEFT_OUT_METADATA).unwrap().to_bytes().unwrap().len() <= MAX_BYTES);
        assert!(read(&MetadataMap::new()).is_empty());
    }
}
