use serde_json::json;

use super::*;

fn limit(rule: &str) -> String {
    match CelRule::compile(rule) {
        Err(CelError::Limit(message)) => message,
        other => panic!("expected a limit error, got {other:?}"),
    }
}

fn props(n: usize) -> Vec<Value> {
    (0..n).map(|i| json!({"type": "olm.gvk", "value": {"group": "g", "kind": format!("K{i}"), "version": "v1"}})).collect()
}

#[test]
fn unsupported_rules_are_reported() {
    assert!(matches!(CelRule::compile("properties.exists(p, p.type == 'x'"), Err(CelError::Syntax(_))));
    assert!(matches!(CelRule::compile("a ? b : c"), Err(CelError::Syntax(_))));
    let r = CelRule::compile("matches(properties, 'x')").expect("parses");
    assert!(r.check_supported().is_err());
    // Neither is a limit: a catalog carrying them is still read.
    assert!(CelRule::check_limits("a ? b : c").is_ok());
}

#[test]
fn forty_thousand_negations_are_refused_as_too_deep_not_a_stack_overflow() {
    // About 40 KB, as the fuzz found: the thread that parses it has the default 2 MiB stack.
    let rule = format!("{}true", "!".repeat(40_000));
    assert!(limit(&rule).contains("nested more than 100 levels"), "{}", limit(&rule));
    // Past 256 the reason is the nesting, never "no operator satisfies the rule".
    assert!(CelRule::check_limits(&format!("{}true", "!".repeat(300))).is_err());
    let fine = CelRule::compile(&format!("{}true", "!".repeat(50))).expect("50 is fine");
    assert!(fine.matches_properties(Vec::new()));
}

#[test]
fn every_kind_of_nesting_counts() {
    let deep = 150;
    let parens = format!("{}true{}", "(".repeat(deep), ")".repeat(deep));
    let members = format!("properties{}", ".a".repeat(deep));
    let indexes = format!("properties{}", "[0]".repeat(deep));
    let calls = format!("{}1{}", "size(".repeat(deep), ")".repeat(deep));
    let lists = format!("{}1{}", "[".repeat(deep), "]".repeat(deep));
    let negatives = format!("{}1 == 1", "-".repeat(deep));
    for rule in [parens, members, indexes, calls, lists, negatives] {
        assert!(limit(&rule).contains("nested more than"), "{rule}");
    }
}

#[test]
fn long_chains_of_conditions_are_balanced_not_deep() {
    let rule = vec!["properties.exists(p, p.type == 'olm.gvk')"; 500].join(" && ");
    let r = CelRule::compile(&rule).expect("a long && chain compiles");
    assert!(r.matches_properties(props(1)));
    let rule = format!("{} || true", vec!["false"; 5_000].join(" || "));
    assert!(CelRule::compile(&rule).expect("compiles").matches_properties(Vec::new()));
}

#[test]
fn nested_macros_past_the_budget_are_refused_when_read() {
    // Each level doubled the time in the fuzz: 24 levels ran for over 20 s.
    let mut rule = "true".to_owned();
    for level in 0..24 {
        rule = format!("properties.all(p{level}, {rule})");
    }
    let message = limit(&rule);
    assert!(message.contains("budget of 1000000") && message.contains("nest fewer macros"), "{message}");
    // Two levels, as real rules may have, are fine.
    let two = "properties.exists(p, p.type == 'olm.gvk' && properties.exists(q, q.type == 'olm.package'))";
    assert!(CelRule::check_limits(two).is_ok());
}

#[test]
fn a_rule_over_budget_at_evaluation_fails_and_is_not_evaluated_again() {
    // Within the estimate (64 properties), over the budget with 3,000.
    let rule = CelRule::compile("properties.all(p, properties.all(q, size(q) == 2))").expect("compiles");
    assert!(rule.matches_properties(props(10)));
    assert!(!rule.exceeded_budget());
    let started = std::time::Instant::now();
    assert!(!rule.matches_properties(props(3_000)));
    assert!(rule.exceeded_budget());
    eprintln!("one evaluation over budget took {:?}", started.elapsed());
    // Stopped for good, even where it would fit.
    assert!(!rule.matches_properties(props(1)));
    // A clone shares the verdict (the resolver clones requirements).
    assert!(rule.clone().exceeded_budget());
}

#[test]
fn over_budget_is_not_absorbed_by_or() {
    let rule = CelRule::compile("properties.all(p, properties.all(q, size(q) == 2)) || true").expect("compiles");
    assert!(!rule.matches_properties(props(3_000)));
    assert!(rule.exceeded_budget());
}

#[test]
fn rules_longer_than_the_limit_are_refused() {
    let rule = format!("'{}' == ''", "x".repeat(MAX_RULE_CHARS));
    assert!(limit(&rule).contains("more than the limit of 100000"));
}

#[test]
fn messages_quote_values_cut_short() {
    let rule = format!("{} x", "a".repeat(10_000));
    let Err(CelError::Syntax(message)) = CelRule::compile(&rule) else { panic!("syntax error expected") };
    assert!(message.len() < 400, "{message}");
}
