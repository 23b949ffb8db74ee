//! CEL constraint rules (`olm.constraint` `cel`): compiling any text neither panics nor
//! overflows the stack (nesting is bounded while parsing), an error is a clear message, and
//! a rule that compiles evaluates within its step budget against a bundle's properties
//! (libFuzzer's -timeout catches one that does not).
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_catalog::cel::CelRule;
use serde_json::{Value, json};

fn properties() -> Vec<Value> {
    vec![
        json!({"type": "olm.package", "value": {"packageName": "etcd", "version": "0.9.4"}}),
        json!({"type": "olm.gvk", "value": {"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"}}),
        json!({"type": "olm.maxOpenShiftVersion", "value": "4.9"}),
        json!({"type": "olm.label", "value": {"label": "tier=backend"}}),
        json!({"type": "olm.list", "value": [1, "a", true, null, {"k": [2.5]}]}),
    ]
}

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else { return };
    match CelRule::compile(source) {
        Ok(rule) => {
            if let Err(e) = rule.check_supported() {
                olm_fuzz::check_message(&e.to_string());
            }
            let first = rule.matches_properties(properties());
            // The same answer again (or false once the budget ran out).
            let second = rule.matches_properties(properties());
            assert!(second == first || rule.exceeded_budget());
            let _ = rule.matches_properties(Vec::new());
        }
        Err(e) => olm_fuzz::check_message(&e.to_string()),
    }
    let _ = CelRule::check_limits(source);
});
