//! Semver versions and blang/semver ranges (`olm.skipRange`, `olm.package.required`):
//! parsing any text neither panics nor errs without a message, and a range that parses
//! answers `contains` for a few versions, including the input itself read as a version.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::version::{Version, VersionRange, cmp_versions, parse_version};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut versions: Vec<Version> = ["0.0.0", "0.9.4", "1.0.0-alpha.1", "1.2.3+build.5", "4.18.0-0.nightly"]
        .iter()
        .filter_map(|v| Version::parse(v).ok())
        .collect();
    match parse_version(text) {
        Ok(v) => versions.push(v),
        Err(e) => olm_fuzz::check_message(&e),
    }
    match VersionRange::parse(text) {
        Ok(range) => {
            for v in &versions {
                let _ = range.contains(v);
            }
            assert_eq!(range.as_str(), text);
        }
        Err(e) => olm_fuzz::check_message(&e.to_string()),
    }
    for pair in versions.windows(2) {
        let _ = cmp_versions(&pair[0], &pair[1]);
    }
});
