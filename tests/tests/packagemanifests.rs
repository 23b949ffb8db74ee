//! `kubectl get packagemanifests` against `olm dev up`, through the real aggregation layer:
//! partial results and a warning for a broken catalog, selectors, all namespaces, explain,
//! authorization, and the icon subresource.

//!
//! On a throwaway `olm dev` environment (temporary state, free port base from 31000), stopped
//! and purged at the end: `olm dev up` starts host OLM processes, which must not act on the
//! cluster other tests share.


use std::process::Command;
use std::time::{Duration, Instant};

use olm_e2e::dev_env::DevEnvironment;

struct Shell {
    kubeconfig: String,
    path: String,
    // Last field: dropped after everything that still uses the cluster.
    _env: DevEnvironment,
}

impl Shell {
    fn new() -> Shell {
        let dev = DevEnvironment::new(31000);
        let olm = |args: &[&str]| dev.olm(args);
        let up = olm(&["dev", "up"]);
        assert!(up.status.success(), "olm dev up: {}", String::from_utf8_lossy(&up.stderr));
        let env_text = String::from_utf8_lossy(&olm(&["dev", "env"]).stdout).into_owned();
        let value = |name: &str| env_text.lines().find_map(|l| l.strip_prefix(&format!("export {name}="))).expect("olm dev env").to_owned();
        let bin = value("PATH").split(':').next().unwrap_or_default().trim_matches('\'').to_owned();
        let kubeconfig = value("KUBECONFIG").trim_matches('\'').to_owned();
        let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
        Shell { kubeconfig, path, _env: dev }
    }

    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .output()
            .expect("kubectl runs");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "kubectl {}: {err}", args.join(" "));
        out
    }
}

struct NamespaceGuard<'a>(&'a Shell, String);

impl Drop for NamespaceGuard<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["delete", "namespace", &self.1, "--wait=false", "--ignore-not-found"]);
    }
}

#[test]
fn packagemanifests_through_the_aggregation_layer() {
    let shell = Shell::new();
    let ns = format!("pm-{}", std::process::id());
    let _guard = NamespaceGuard(&shell, ns.clone());
    shell.ok(&["create", "namespace", &ns]);
    let broken = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: broken\n  namespace: {ns}\nspec:\n  sourceType: grpc\n  address: 127.0.0.1:1\n  displayName: Broken\n"
    );
    let file = std::env::temp_dir().join(format!("{ns}-broken.yaml"));
    std::fs::write(&file, broken).expect("write temp file");
    shell.ok(&["apply", "-f", &file.display().to_string()]);
    let _ = std::fs::remove_file(&file);

    // A broken catalog in the namespace: the list still answers (etcd from the global catalog)
    // and kubectl prints the server's warning.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (out, err) = loop {
        let (ok, out, err) = shell.run(&["get", "packagemanifests", "-n", &ns]);
        assert!(ok, "list must not fail because of one catalog: {err}");
        if err.contains("Warning: catalog") && err.contains("cannot be read") {
            break (out, err);
        }
        assert!(Instant::now() < deadline, "no warning about {ns}/broken after 30s; stderr: {err}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(err.contains(&format!("{ns}/broken")), "{err}");
    assert!(out.lines().any(|l| l.starts_with("etcd ")), "{out}");

    // Selectors.
    let names = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["get", "packagemanifests", "-n", ns.as_str(), "-o", "name"];
        full.extend_from_slice(args);
        shell.ok(&full).lines().map(|l| l.rsplit('/').next().unwrap_or_default().to_owned()).collect()
    };
    assert_eq!(names(&["-l", "catalog=community"]), ["etcd"]);
    assert_eq!(names(&["-l", "catalog-namespace=olm,operatorframework.io/os.linux=supported"]), ["etcd"]);
    assert!(names(&["-l", "catalog=broken"]).is_empty());
    assert_eq!(names(&["--field-selector", "metadata.name=etcd"]), ["etcd"]);
    let (ok, _, err) = shell.run(&["get", "packagemanifests", "-n", &ns, "--field-selector", "status.defaultChannel=x"]);
    assert!(!ok && err.contains("field label not supported"), "{err}");

    // All namespaces: each package with its catalog's real namespace.
    let all = shell.ok(&["get", "packagemanifests", "-A"]);
    assert!(all.lines().next().unwrap_or_default().split_whitespace().eq(["NAMESPACE", "NAME", "CATALOG", "AGE"]), "{all}");
    assert!(all.lines().any(|l| l.split_whitespace().take(2).eq(["olm", "etcd"])), "{all}");

    // Discovery and OpenAPI: api-resources and explain.
    let resources = shell.ok(&["api-resources", "--api-group=packages.operators.coreos.com"]);
    assert!(resources.contains("packagemanifests"), "{resources}");
    // The aggregator publishes an APIService's OpenAPI v3 a while after discovery serves it (a
    // CI run saw "couldn't find resource" right after api-resources listed it): kubectl explain
    // is retried for up to 90 s (its retry of a failed fetch is a minute), as a user would.
    let deadline = Instant::now() + Duration::from_secs(90);
    let explain = loop {
        let (ok, out, err) = shell.run(&["explain", "packagemanifest.status"]);
        if ok {
            break out;
        }
        assert!(Instant::now() < deadline, "kubectl explain packagemanifest.status after 90s: {err}");
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(explain.contains("defaultChannel") && explain.contains("catalogSource"), "{explain}");

    // The icon subresource.
    let icon = Command::new("kubectl")
        .args(["get", "--raw", "/apis/packages.operators.coreos.com/v1/namespaces/olm/packagemanifests/etcd/icon"])
        .env("KUBECONFIG", &shell.kubeconfig)
        .env("PATH", &shell.path)
        .output()
        .expect("kubectl runs");
    assert!(icon.status.success());
    assert!(icon.stdout.starts_with(b"\x89PNG") || icon.stdout.starts_with(b"<svg"), "an image");

    // Authorization is delegated: a user without RBAC is refused.
    let (ok, _, err) = shell.run(&["get", "packagemanifests", "-n", &ns, "--as=nobody-at-all"]);
    assert!(!ok && err.contains("Forbidden"), "{err}");
}
