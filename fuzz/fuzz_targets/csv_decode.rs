//! The ClusterServiceVersion decoder (`olm_api::yaml::from_str`, what reads a CSV from a
//! bundle or a file): any bytes neither panic nor take unbounded work, and an error says
//! where (origin, line, field) and why in a sentence. A CSV that decodes is written back
//! as YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_api::v1alpha1::ClusterServiceVersion;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match olm_api::yaml::from_str::<ClusterServiceVersion>(text, "fuzz.clusterserviceversion.yaml") {
        Ok(csv) => {
            let _ = olm_api::yaml::to_string(&csv);
        }
        Err(e) => {
            olm_fuzz::check_message(&e.to_string());
            if let Some(invalid) = e.invalid() {
                olm_fuzz::check_message(&invalid.message);
            }
        }
    }
    if let Err(e) = olm_api::yaml::all_from_str::<ClusterServiceVersion>(text, "fuzz.clusterserviceversion.yaml")
        && let Some(invalid) = e.invalid()
    {
        olm_fuzz::check_message(&invalid.message);
    }
});
