//! Hostile catalogs through the CLI, as an attacker or a careless author would write them:
//! each is refused in bounded time with a message naming the file, package, bundle and the
//! limit, and the healthy package beside it is still read and resolved.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::json;

fn olm(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_olm")).current_dir(dir).args(args).output().expect("run olm")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A package of one bundle, as FBC JSON, with an `olm.constraint` CEL rule when given.
fn package(name: &str, rule: Option<&str>) -> String {
    let mut properties = vec![json!({"type": "olm.package", "value": {"packageName": name, "version": "1.0.0"}})];
    if let Some(rule) = rule {
        properties.push(json!({"type": "olm.constraint", "value": {"failureMessage": "hostile", "cel": {"rule": rule}}}));
    }
    let docs = [
        json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": name, "name": "stable", "entries": [{"name": format!("{name}.v1.0.0")}]}),
        json!({"schema": "olm.bundle", "name": format!("{name}.v1.0.0"), "package": name,
               "image": format!("example.com/{name}@sha256:{}", "a".repeat(64)), "properties": properties}),
    ];
    docs.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")
}

/// `catalog/` holding a healthy package `fine` and the package `hostile` with `rule`, and a
/// resolve request subscribing to `fine`.
fn catalog_with_rule(rule: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, rule) in [("fine", None), ("hostile", Some(rule))] {
        std::fs::create_dir_all(dir.path().join("catalog").join(name)).expect("mkdir");
        std::fs::write(dir.path().join("catalog").join(name).join("index.json"), package(name, rule)).expect("write");
    }
    std::fs::write(
        dir.path().join("request.yaml"),
        "namespace: ops\ncatalogs:\n- {name: c, namespace: olm, path: ./catalog}\nsubscriptions:\n- {package: fine, catalog: c}\n",
    )
    .expect("write");
    dir
}

/// Validate refuses the rule naming where it is and the limit; resolve still installs `fine`.
fn refused_by_validate_and_isolated_in_resolve(rule: &str, limit: &str) {
    let dir = catalog_with_rule(rule);
    let started = Instant::now();
    let o = olm(dir.path(), &["catalog", "validate", "catalog"]);
    let out = text(&o);
    eprintln!("validate took {:?}", started.elapsed());
    assert_eq!(o.status.code(), Some(1), "{out}");
    let problems: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("- ")).collect();
    assert_eq!(problems.len(), 1, "one cause, said once: {out}");
    for needle in ["catalog/hostile/index.json", "package \"hostile\"", "bundle \"hostile.v1.0.0\"", "the CEL rule", limit] {
        assert!(problems[0].contains(needle), "{needle:?} in {out}");
    }
    assert!(out.len() < 2_000, "the rule is quoted cut short: {} bytes", out.len());

    let o = olm(dir.path(), &["resolve", "--request", "request.yaml", "--output", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let resolved: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(resolved["bundles"][0]["name"], "fine.v1.0.0");
    assert!(String::from_utf8_lossy(&o.stderr).contains(limit));
}

#[test]
fn a_cel_rule_of_forty_thousand_negations_is_refused_not_a_stack_overflow() {
    let rule = format!("{}true", "!".repeat(40_000));
    refused_by_validate_and_isolated_in_resolve(&rule, "nested more than 100 levels");
}

#[test]
fn a_cel_rule_of_nested_macros_is_refused_before_it_runs_for_minutes() {
    let mut rule = "p23.type == 'x'".to_owned();
    for level in (0..24).rev() {
        rule = format!("properties.all(p{level}, {rule})");
    }
    refused_by_validate_and_isolated_in_resolve(&rule, "more than the budget of 1000000");
}

#[test]
fn a_cel_rule_nested_300_deep_is_said_to_be_past_the_limit_of_100_not_unsatisfiable() {
    let rule = format!("{}properties.exists(p, p.type == 'olm.package')", "!!".repeat(150));
    refused_by_validate_and_isolated_in_resolve(&rule, "nested more than 100 levels");
}

/// A catalog directory holding the healthy package `fine` beside links and a FIFO: a link to
/// itself and one to its parent (loops, were they followed), links to `/` and to a file
/// outside, and a FIFO where a catalog file would be (opening it would block for ever).
fn catalog_with_hostile_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = dir.path().join("catalog");
    std::fs::create_dir_all(catalog.join("fine")).expect("mkdir");
    std::fs::create_dir_all(catalog.join("evil")).expect("mkdir");
    std::fs::write(catalog.join("fine/index.json"), package("fine", None)).expect("write");
    std::os::unix::fs::symlink(".", catalog.join("self")).expect("link");
    std::os::unix::fs::symlink("..", catalog.join("evil/up")).expect("link");
    std::os::unix::fs::symlink("/", catalog.join("root")).expect("link");
    std::os::unix::fs::symlink("/etc/passwd", catalog.join("evil/passwd.yaml")).expect("link");
    let fifo = Command::new("mkfifo").arg(catalog.join("evil/index.json")).status().expect("mkfifo");
    assert!(fifo.success());
    dir
}

#[test]
fn links_out_of_the_catalog_loops_and_fifos_are_named_and_never_followed() {
    let dir = catalog_with_hostile_files();
    let started = Instant::now();
    let o = olm(dir.path(), &["catalog", "validate", "catalog"]);
    let out = text(&o);
    eprintln!("validate took {:?}", started.elapsed());
    assert_eq!(o.status.code(), Some(1), "{out}");
    for needle in [
        "catalog/root: symlink points outside the catalog, to \"/\"",
        "catalog/evil/passwd.yaml: symlink points outside the catalog, to \"/etc/passwd\"",
        "catalog/evil/index.json: is a FIFO",
        "catalog/self: symlink to the directory",
        "not followed",
    ] {
        assert!(out.contains(needle), "{needle:?} in {out}");
    }
    assert!(!out.contains("root:x:0:0"), "nothing outside the catalog is read: {out}");

    // Render refuses the sources naming them, in bounded time.
    let o = olm(dir.path(), &["catalog", "render", "catalog"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("catalog/evil/index.json: is a FIFO"), "{}", text(&o));
}

#[test]
fn serve_publishes_the_healthy_package_and_names_the_hostile_files() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let dir = catalog_with_hostile_files();
    let mut child = Command::new(env!("CARGO_BIN_EXE_olm"))
        .current_dir(dir.path())
        .args(["catalog", "serve", "--catalog", "c=catalog", "--http-addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start olm catalog serve");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut addr = None;
    let mut seen = Vec::new();
    for line in lines.map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("HTTP on http://") {
            addr = rest.split_whitespace().next().map(str::to_owned);
            break;
        }
        seen.push(line);
    }
    let addr = addr.unwrap_or_else(|| panic!("serve never listened: {seen:?}"));
    let get = |path: &str| {
        let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
        let mut body = String::new();
        stream.read_to_string(&mut body).expect("response");
        body
    };
    let ready = get("/readyz");
    let all = get("/catalogs/c/api/v1/all");
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen.iter().any(|l| l.starts_with("catalog c: 1 packages")), "{seen:?}");
    assert!(ready.contains("\"ready\":true") && ready.contains("is a FIFO") && ready.contains("points outside the catalog"), "{ready}");
    assert!(all.contains("\"name\":\"fine\""), "{all}");
    assert!(!all.contains("root:x:0:0") && !all.contains("/etc/passwd"), "nothing outside the catalog is served: {all}");
}
