//! `olm console` (issue #55) in a real browser: headless Chromium from Debian's packages, driven
//! through WebDriver (chromedriver), against `olm dev up` (OLM, its package server and the
//! bundled catalog) on a throwaway environment.
//!
//! - without the one-time URL nothing answers (no cookie: 401; another Host: 421; another
//!   Origin: 403), and the URL opens one session only;
//! - etcd is installed by clicking: catalog → search → package → Install → Preview (the YAML
//!   and the server-side dry run) → Create → the Installed page shows its CSV Succeeded;
//! - the Installed page follows the cluster (server-sent events from watches): no reload by
//!   the test;
//! - with Manual approval from 0.9.2, the first install (its permissions listed as added) and
//!   the upgrade to 0.9.4 each wait on the review page (the plan as `kubectl olm plan show`
//!   sees it) and are approved by a click, each followed to Succeeded;
//! - a catalog whose package carries `<script>`, an `onerror` image in its name and a
//!   `javascript:` link runs no script and links nowhere on the catalog and package pages, whose
//!   permissions (from the CSV the catalog carries whole) are listed as text;
//! - Roll back (0.9.4 → 0.9.2: its plan reviewed and approved by a click, followed to
//!   Succeeded) and Uninstall (what goes and what stays; the operand kept, then deleted when
//!   its box is ticked; the CRD kept) from the Installed page;
//! - the keyboard alone searches, opens the package and reaches Install, the focus always
//!   visible; at 400 pixels wide no page is wider than the window;
//! - a user bound to `admin` in one namespace sees that namespace's packages and
//!   Subscriptions only, and installing into another shows the API server's refusal in words.
//!
//! `OLM_CONSOLE_SCREENSHOTS=$PWD/docs/console` saves each page there (README, docs/console.md).
//!
//! Needs chromium and chromium-driver (installed with apt-get when running as root; skipped
//! with a message otherwise).

use std::path::Path;
use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use olm_e2e::browser::{browser, browser_available, chromedriver, get, start_console};
use olm_e2e::dev_env::{DevEnvironment, kubectl, kubectl_paths, wait_for};
use serde_json::json;

/// A catalog image of one package whose every text tries to run a script.
fn push_hostile_catalog(work: &Path, registry: &str) -> String {
    let dir = work.join("hostile");
    std::fs::create_dir_all(&dir).expect("catalog dir");
    let csv_metadata = json!({
        "displayName": "<img src=x onerror=\"window.pwned='name'\">Hostile",
        "description": "# Hostile\n\n<script>window.pwned='description'</script>\n\n[click me](javascript:window.pwned='link') and <a href=\"javascript:window.pwned='raw'\">raw</a>",
        "annotations": {"description": "<script>window.pwned='card'</script>", "categories": "Security"},
        "provider": {"name": "<b onmouseover=\"window.pwned='provider'\">Evil</b>"},
        "links": [{"name": "home", "url": "javascript:window.pwned='links'"}],
        "installModes": [{"type": "AllNamespaces", "supported": true}],
    });
    // The whole CSV too (an `olm.bundle.object`): its install's permissions are shown, escaped.
    let mut spec = csv_metadata.clone();
    spec["version"] = json!("1.0.0");
    spec["install"] = json!({"strategy": "deployment", "spec": {"deployments": [],
        "permissions": [{"serviceAccountName": "hostile", "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["<script>window.pwned='rule'</script>"]}]}],
        "clusterPermissions": [{"serviceAccountName": "hostile", "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}]}});
    let annotations = spec.as_object_mut().and_then(|s| s.remove("annotations")).unwrap_or_default();
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": {"name": "hostile.v1.0.0", "annotations": annotations}, "spec": spec});
    use base64::Engine as _;
    let csv_object = base64::engine::general_purpose::STANDARD.encode(csv.to_string());
    let docs = [
        json!({"schema": "olm.package", "name": "hostile", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": "hostile", "name": "stable", "entries": [{"name": "hostile.v1.0.0"}]}),
        json!({"schema": "olm.bundle", "package": "hostile", "name": "hostile.v1.0.0", "image": "example.com/hostile-bundle:v1.0.0",
               "properties": [{"type": "olm.package", "value": {"packageName": "hostile", "version": "1.0.0"}}, {"type": "olm.bundle.object", "value": {"data": csv_object}}]}),
    ];
    std::fs::write(dir.join("catalog.json"), docs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")).expect("write catalog");
    let image = format!("{registry}/e2e/hostile-catalog:v1");
    olm_e2e::olm(&["catalog", "push", dir.to_str().expect("path"), &image]).expect("olm catalog push");
    image
}

/// Marks the page, so that [`new_page_loaded`] can tell when another has replaced it.
async fn mark_page(client: &Client) {
    client.execute("window.__olmConsoleBefore = true;", vec![]).await.expect("mark the page");
}

/// Waits (30 s at most) until a page other than the one marked has loaded; whether one did (a
/// click or a key press returns before the navigation it starts has ended).
async fn new_page_loaded(client: &Client) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        let loaded = client
            .execute("return window.__olmConsoleBefore === undefined && document.readyState === 'complete';", vec![])
            .await
            .unwrap_or(serde_json::Value::Bool(false));
        if loaded == serde_json::Value::Bool(true) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Clicks what `css` finds and waits until the page it leads to has loaded.
async fn click_to_page(client: &Client, css: &str) {
    mark_page(client).await;
    client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).click().await.expect("click");
    assert!(new_page_loaded(client).await, "clicking {css} led to no new page");
}

/// Clicks what `css` finds on a live page (one that reloads itself when the cluster changes)
/// until the browser is at a path starting with `path`: a reload that lands between the click
/// and its navigation leaves it on the same page, so it clicks again (at most 5 times).
async fn click_through(client: &Client, css: &str, path: &str) {
    for _ in 0..5 {
        mark_page(client).await;
        // The element may go with a reload between finding and clicking it: then again.
        let clicked = match client.find(Locator::Css(css)).await {
            Ok(element) => element.click().await.is_ok(),
            Err(_) => false,
        };
        if clicked {
            new_page_loaded(client).await;
        }
        if client.current_url().await.expect("url").path().starts_with(path) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!("clicking {css} never led to {path}:\n{}", text_of(client).await);
}

/// Presses `keys` on the focused element and waits until the page that leads to has loaded
/// and is `path`.
async fn press_to_page(client: &Client, keys: &str, path: &str) {
    mark_page(client).await;
    client.active_element().await.expect("the focused element").send_keys(keys).await.expect("keys");
    assert!(new_page_loaded(client).await, "pressing {keys:?} led to no new page");
    assert_eq!(client.current_url().await.expect("url").path(), path);
}

/// Waits (180 s at most) until the Installed page's row of Subscription `subscription`
/// (`namespace/name`) shows `csv` Succeeded, following the page as it reloads itself; how long.
async fn succeeded_in_row(client: &Client, subscription: &str, csv: &str) -> Duration {
    let started = Instant::now();
    loop {
        let row = match client.find(Locator::Css(&format!("tr[data-subscription='{subscription}']"))).await {
            Ok(row) => row.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if row.contains(&format!("{csv} Succeeded")) {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(180), "{csv} did not reach Succeeded on the Installed page: {row:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn text_of(client: &Client) -> String {
    match client.find(Locator::Css("main")).await {
        Ok(main) => main.text().await.expect("its text"),
        Err(err) => panic!("the page at {:?} has no <main> ({err}):\n{}", client.current_url().await.ok(), client.source().await.unwrap_or_default()),
    }
}

async fn no_script_ran(client: &Client, page: &str) {
    let pwned = client.execute("return window.pwned === undefined ? null : String(window.pwned);", vec![]).await.expect("execute");
    assert_eq!(pwned, serde_json::Value::Null, "a script of the catalog ran on the {page} page");
    let hrefs = client.execute("return Array.from(document.querySelectorAll('[href],[src]')).map(e => e.getAttribute('href') || e.getAttribute('src'));", vec![]).await.expect("execute");
    assert!(!hrefs.to_string().to_lowercase().contains("javascript:"), "the {page} page links to javascript: {hrefs}");
    let handlers = client.execute("return Array.from(document.querySelectorAll('*')).flatMap(e => Array.from(e.attributes).map(a => a.name)).filter(n => n.startsWith('on'));", vec![]).await.expect("execute");
    assert_eq!(handlers, json!([]), "no element of the {page} page has an event handler attribute");
}

/// With OLM_CONSOLE_SCREENSHOTS=DIR, each page is saved as DIR/<name>.png (docs/console/ has
/// them: `OLM_CONSOLE_SCREENSHOTS=$PWD/docs/console cargo test -p olm-e2e --test console`).
async fn shot(client: &Client, name: &str) {
    if let Some(dir) = std::env::var_os("OLM_CONSOLE_SCREENSHOTS") {
        let png = client.screenshot().await.expect("screenshot");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).expect("write screenshot");
    }
}

/// A kubeconfig of the environment as ServiceAccount `team-a/alice`, bound to `admin` in
/// team-a only.
fn namespace_admin_kubeconfig(env: &DevEnvironment, dir: &Path) -> std::path::PathBuf {
    let setup = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: alice\n  namespace: team-a\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: alice-admin\n  namespace: team-a\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: admin\nsubjects:\n- kind: ServiceAccount\n  name: alice\n  namespace: team-a\n";
    let applied = kubectl(env, &["apply", "-f", "-"], Some(setup));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let token = kubectl(env, &["create", "token", "alice", "-n", "team-a"], None);
    assert!(token.status.success(), "{}", String::from_utf8_lossy(&token.stderr));
    let (_, kubeconfig) = kubectl_paths(env);
    let mut config = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig");
    for named in &mut config.auth_infos {
        named.auth_info = Some(kube::config::AuthInfo { token: Some(String::from_utf8_lossy(&token.stdout).trim().to_owned().into()), ..Default::default() });
    }
    let path = dir.join("alice.kubeconfig");
    std::fs::write(&path, serde_json::to_string(&config).expect("json")).expect("write kubeconfig");
    path
}

#[test]
fn a_cluster_admin_installs_etcd_by_clicking_and_a_hostile_catalog_runs_nothing() {
    if !browser_available() {
        eprintln!("SKIPPED console: needs chromium and chromium-driver (apt-get install chromium chromium-driver, or run the suite as root to have them installed)");
        return;
    }
    let first_base = std::env::var("OLM_TEST_PORT_BASE").ok().and_then(|b| b.parse().ok()).unwrap_or(30800);
    let mut env = DevEnvironment::new(first_base);
    let up = env.olm(&["dev", "up"]);
    assert!(up.status.success(), "olm dev up: {}", String::from_utf8_lossy(&up.stderr));
    let registry = format!("127.0.0.1:{}", env.base + 500);
    let work = tempfile::tempdir().expect("work dir");
    let hostile = push_hostile_catalog(work.path(), &registry);
    let source = format!("apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: hostile\n  namespace: olm\nspec:\n  sourceType: grpc\n  image: {hostile}\n  displayName: Hostile <script>\n");
    let applied = kubectl(&env, &["apply", "-f", "-"], Some(&source));
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    wait_for("the hostile package served", Duration::from_secs(120), || {
        let out = kubectl(&env, &["get", "packagemanifest", "hostile", "-n", "olm", "-o", "name"], None);
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });

    // The console, as the environment's admin.
    let (_, kubeconfig) = kubectl_paths(&env);
    let (url, _console) = start_console(&kubeconfig, &[]);
    let port: u16 = url.trim_start_matches("http://127.0.0.1:").split('/').next().and_then(|p| p.parse().ok()).expect("a port");
    let host = format!("127.0.0.1:{port}");

    // Nothing answers without the session.
    let (code, body) = get(port, "/", &[("Host", &host)]);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("open the console with the URL"), "{body}");
    assert_eq!(get(port, "/installed", &[("Host", &host), ("Cookie", "olm_console=guess")]).0, 401);
    assert_eq!(get(port, "/", &[("Host", &format!("rebound.example:{port}"))]).0, 421);
    assert_eq!(get(port, "/", &[("Host", &host), ("Origin", "https://evil.example")]).0, 403);

    let (driver_port, _driver) = chromedriver();

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let client = browser(driver_port).await;
        client.goto(&url).await.expect("open the console");
        assert_eq!(client.current_url().await.expect("url").path(), "/", "the token is exchanged for a cookie and left out of the address");
        let catalog = text_of(&client).await;
        assert!(catalog.contains("etcd") && catalog.contains("packages"), "{catalog}");
        shot(&client, "catalog").await;
        no_script_ran(&client, "catalog").await;
        assert!(catalog.contains("<img src=x onerror="), "the hostile name is shown as text: {catalog}");

        // etcd, by clicking.
        client.find(Locator::Css("input[name=q]")).await.expect("search").send_keys("etcd").await.expect("type");
        click_to_page(&client, "form.filters button").await;
        let filtered = text_of(&client).await;
        assert!(filtered.contains("1 of"), "the search leaves etcd: {filtered}");
        click_to_page(&client, "a[href='/package/olm/etcd']").await;
        let package = text_of(&client).await;
        assert!(package.contains("Channels and versions") && package.contains("(default)"), "{package}");
        assert!(
            package.contains("Permissions the install grants") && package.contains("The catalog carries only this version's metadata"),
            "the bundled catalog names bundle images only: where its permissions will be shown is said: {package}"
        );
        shot(&client, "package").await;
        click_to_page(&client, "a[href='/install/olm/etcd']").await;
        let namespace = client.find(Locator::Css("input[name=namespace]")).await.expect("namespace field");
        namespace.clear().await.expect("clear");
        namespace.send_keys("console-etcd").await.expect("type");
        shot(&client, "install").await;
        click_to_page(&client, "button[value=preview]").await;
        let preview = text_of(&client).await;
        for expected in ["Namespace console-etcd does not exist: it is created.", "kind: Subscription", "name: etcd", "Namespace console-etcd: accepted"] {
            assert!(preview.contains(expected), "{expected:?} on the preview:\n{preview}");
        }
        shot(&client, "preview").await;
        click_to_page(&client, "button[value=create]").await;
        assert_eq!(client.current_url().await.expect("url").path(), "/installed", "Create leads to the Installed page:\n{}", text_of(&client).await);
        let started = Instant::now();
        loop {
            let row = client.find(Locator::Css("tr[data-subscription='console-etcd/etcd'] td.phase")).await.map(|e| e);
            let phase = match row {
                Ok(cell) => cell.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if phase.starts_with("Succeeded") {
                eprintln!("etcd Succeeded on the Installed page {:?} after Create", started.elapsed());
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(240), "etcd did not reach Succeeded on the Installed page: {phase:?}\n{}", text_of(&client).await);
            // No refresh here: the page follows the cluster through its event stream.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        shot(&client, "installed").await;

        // An instance of an API etcd provides, from its CSV's example: checked, then created.
        click_through(&client, "tr[data-subscription='console-etcd/etcd'] td.apis a[href$='/EtcdCluster']", "/instance/").await;
        let yaml = client.execute("return document.getElementById('yaml').value;", vec![]).await.expect("the YAML");
        let yaml = yaml.as_str().unwrap_or_default().to_owned();
        assert!(yaml.contains("kind: EtcdCluster") && yaml.contains("namespace: console-etcd"), "the example, in the operator's namespace: {yaml}");
        shot(&client, "instance").await;
        click_to_page(&client, "button[value=check]").await;
        let checked = text_of(&client).await;
        assert!(checked.contains("Accepted by the server-side dry run"), "{checked}");
        assert!(kubectl(&env, &["get", "etcdclusters", "-n", "console-etcd", "-o", "name"], None).stdout.is_empty(), "a dry run creates nothing");
        click_to_page(&client, "button[value=create]").await;
        let created = text_of(&client).await;
        assert!(created.contains("Created EtcdCluster example in namespace console-etcd"), "{created}");
        let listed = kubectl(&env, &["get", "etcdclusters", "-n", "console-etcd", "-o", "name"], None);
        assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "etcdcluster.etcd.database.coreos.com/example", "{}", String::from_utf8_lossy(&listed.stderr));
        // Created twice: the API server's refusal, in words.
        click_to_page(&client, "button[value=create]").await;
        let again = text_of(&client).await;
        assert!(again.contains("Refused:") && again.contains("already exists"), "{again}");
        no_script_ran(&client, "instance").await;

        // Manual approval: the first install and the upgrade each wait on the review page.
        client.goto(&format!("http://{host}/install/olm/etcd")).await.expect("open");
        let namespace = client.find(Locator::Css("input[name=namespace]")).await.expect("namespace field");
        namespace.clear().await.expect("clear");
        namespace.send_keys("console-manual").await.expect("type");
        client.find(Locator::Css("select[name=version] option[value='etcdoperator.v0.9.2']")).await.expect("0.9.2").click().await.expect("choose");
        client.find(Locator::Css("input[name=approval][value=Manual]")).await.expect("Manual").click().await.expect("choose");
        click_to_page(&client, "button[value=preview]").await;
        let preview = text_of(&client).await;
        assert!(preview.contains("startingCSV: etcdoperator.v0.9.2") && preview.contains("installPlanApproval: Manual"), "{preview}");
        click_to_page(&client, "button[value=create]").await;
        for (version, expected) in [("0.9.2", "+ in the target namespaces, ServiceAccount etcd-operator: * etcdclusters.etcd.database.coreos.com"), ("0.9.4", "Upgrades etcdoperator.v0.9.2 to etcdoperator.v0.9.4")] {
            let link = Locator::Css("tr[data-subscription='console-manual/etcd'] a[href^='/plan/']");
            let waited = Instant::now();
            let review = loop {
                if let Ok(link) = client.find(link).await {
                    break link;
                }
                assert!(waited.elapsed() < Duration::from_secs(120), "no plan of {version} to review on the Installed page:\n{}", text_of(&client).await);
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            drop(review);
            click_through(&client, "tr[data-subscription='console-manual/etcd'] a[href^='/plan/']", "/plan/").await;
            let page = text_of(&client).await;
            assert!(page.contains("waits for approval") && page.contains(expected), "the review of {version}:\n{page}");
            eprintln!("the review page of {version}:\n{page}");
            shot(&client, &format!("review-{version}")).await;
            click_to_page(&client, "form[action$='/approve'] button").await;
            let took = succeeded_in_row(&client, "console-manual/etcd", &format!("etcdoperator.v{version}")).await;
            eprintln!("{version} approved by a click, Succeeded {took:?} later");
        }

        // Rollback: back from 0.9.4 to 0.9.2, its plan reviewed and approved like any other.
        client.goto(&format!("http://{host}/installed")).await.expect("open");
        click_through(&client, "tr[data-subscription='console-manual/etcd'] a[href^='/rollback/']", "/rollback/").await;
        let page = text_of(&client).await;
        assert!(page.contains("Rolls Subscription console-manual/etcd back from etcdoperator.v0.9.4 to etcdoperator.v0.9.2."), "{page}");
        assert!(page.contains("through an InstallPlan (Manual approval)"), "{page}");
        shot(&client, "rollback").await;
        click_to_page(&client, "form[action='/rollback/console-manual/etcd'] button").await;
        if !client.current_url().await.expect("url").path().starts_with("/plan/") {
            // Not planned within the console's wait: the Installed page follows it.
            let waited = Instant::now();
            while client.find(Locator::Css("tr[data-subscription='console-manual/etcd'] a[href^='/plan/']")).await.is_err() {
                assert!(waited.elapsed() < Duration::from_secs(120), "the rollback's plan never waited for approval:\n{}", text_of(&client).await);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            click_through(&client, "tr[data-subscription='console-manual/etcd'] a[href^='/plan/']", "/plan/").await;
        }
        let review = text_of(&client).await;
        assert!(review.contains("waits for approval") && review.contains("etcdoperator.v0.9.2"), "the rollback's plan on the review page:\n{review}");
        click_to_page(&client, "form[action$='/approve'] button").await;
        let took = succeeded_in_row(&client, "console-manual/etcd", "etcdoperator.v0.9.2").await;
        eprintln!("rolled back to 0.9.2 by two clicks, Succeeded {took:?} after Approve");

        // Uninstall: what goes and what stays, the operand kept, then deleted when asked.
        click_through(&client, "tr[data-subscription='console-etcd/etcd'] a[href^='/uninstall/']", "/uninstall/").await;
        let page = text_of(&client).await;
        assert!(page.contains("Uninstalls Subscription console-etcd/etcd (etcdoperator.v0.9.4)"), "{page}");
        let kept = client.find(Locator::Css("ul.kept")).await.expect("what stays").text().await.expect("text");
        assert!(kept.contains("1 operand(s), the objects of its CRDs (“Also delete its operands” deletes them):") && kept.contains("EtcdCluster console-etcd/example"), "{kept}");
        assert!(kept.contains("CustomResourceDefinition etcdclusters.etcd.database.coreos.com (“Also delete its CRDs” deletes it)"), "{kept}");
        client.find(Locator::Css("form.options input[name=operands]")).await.expect("the operands box").click().await.expect("tick");
        click_to_page(&client, "form.options button").await;
        let goes = client.find(Locator::Css("ul.goes")).await.expect("what goes").text().await.expect("text");
        assert!(goes.contains("EtcdCluster console-etcd/example (operand)") && goes.contains("Subscription etcd"), "{goes}");
        shot(&client, "uninstall").await;
        client.find(Locator::Css("form.confirm input[name=confirm]")).await.expect("the confirmation box").click().await.expect("tick");
        click_to_page(&client, "form.confirm button").await;
        let done = text_of(&client).await;
        assert!(done.contains("Uninstalled etcdoperator.v0.9.4."), "{done}");
        for kind in ["subscriptions", "clusterserviceversions", "etcdclusters"] {
            let left = kubectl(&env, &["get", kind, "-n", "console-etcd", "-o", "name"], None);
            assert!(left.status.success() && left.stdout.is_empty(), "{kind} left in console-etcd: {}{}", String::from_utf8_lossy(&left.stdout), String::from_utf8_lossy(&left.stderr));
        }
        let crd = kubectl(&env, &["get", "crd", "etcdclusters.etcd.database.coreos.com", "-o", "name"], None);
        assert!(crd.status.success(), "the CRD stays: {}", String::from_utf8_lossy(&crd.stderr));

        // The keyboard alone: search, open the package, reach Install; focus is always visible.
        client.goto(&format!("http://{host}/")).await.expect("open");
        let focused_is = |css: &'static str| {
            let client = client.clone();
            async move {
                let found = client
                    .execute("const e = document.activeElement; return [e.matches(arguments[0]), getComputedStyle(e).outlineStyle];", vec![json!(css)])
                    .await
                    .expect("execute");
                (found[0] == json!(true), found[1].as_str().unwrap_or_default().to_owned())
            }
        };
        let tab_to = |css: &'static str| {
            let client = client.clone();
            async move {
                for _ in 0..60 {
                    client.active_element().await.expect("the focused element").send_keys("\u{E004}").await.expect("Tab");
                    let (there, outline) = focused_is(css).await;
                    if there {
                        assert_ne!(outline, "none", "the focus on {css} is visible");
                        return;
                    }
                }
                panic!("60 presses of Tab never reached {css}");
            }
        };
        tab_to("input[name=q]").await;
        press_to_page(&client, "etcd\u{E007}", "/").await;
        assert!(text_of(&client).await.contains("1 of"), "the search, typed and sent with Enter, leaves etcd");
        tab_to("a[href='/package/olm/etcd']").await;
        press_to_page(&client, "\u{E007}", "/package/olm/etcd").await;
        tab_to("a[href='/install/olm/etcd']").await;
        press_to_page(&client, "\u{E007}", "/install/olm/etcd").await;

        // A narrow window: one column, nothing wider than the window.
        client.set_window_size(400, 800).await.expect("a narrow window");
        for path in ["/", "/package/olm/etcd", "/installed", "/uninstall/console-manual/etcd", "/install/olm/etcd"] {
            client.goto(&format!("http://{host}{path}")).await.expect("open");
            let widths = client.execute("return [document.documentElement.scrollWidth, document.documentElement.clientWidth];", vec![]).await.expect("execute");
            assert!(widths[0].as_u64() <= widths[1].as_u64(), "{path} is wider than a 400-pixel window: {widths}");
        }
        client.goto(&format!("http://{host}/installed")).await.expect("open");
        shot(&client, "narrow-installed").await;
        client.set_window_size(1280, 800).await.expect("back to 1280×800");

        // The hostile package's own page.
        client.goto(&format!("http://{host}/package/olm/hostile")).await.expect("open");
        let page = text_of(&client).await;
        assert!(page.contains("<script>window.pwned='description'</script>"), "the script is shown as text: {page}");
        assert!(page.contains("cluster-wide, ServiceAccount hostile: * *"), "what its install grants: {page}");
        assert!(page.contains("in the target namespaces, ServiceAccount hostile: <script>window.pwned='rule'</script> secrets"), "a rule's text is shown as text: {page}");
        no_script_ran(&client, "package").await;
        client.close().await.expect("close the browser");

        // A user bound to one namespace sees that namespace, and another's refusal in words.
        let alice = namespace_admin_kubeconfig(&env, work.path());
        let (alice_url, _alice_console) = start_console(&alice, &["--namespace=team-a"]);
        let as_alice = browser(driver_port).await;
        as_alice.goto(&alice_url).await.expect("open");
        let catalog = text_of(&as_alice).await;
        assert!(catalog.contains("You may not list packages in all namespaces") && catalog.contains("showing namespace team-a") && catalog.contains("etcd"), "{catalog}");
        let alice_port = alice_url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
        as_alice.goto(&format!("http://{alice_port}/installed")).await.expect("open");
        let installed = text_of(&as_alice).await;
        assert!(installed.contains("showing namespace team-a") && !installed.contains("console-etcd"), "only team-a: {installed}");
        as_alice.goto(&format!("http://{alice_port}/install/team-a/etcd")).await.expect("open");
        let namespace = as_alice.find(Locator::Css("input[name=namespace]")).await.expect("namespace field");
        namespace.clear().await.expect("clear");
        namespace.send_keys("team-b").await.expect("type");
        click_to_page(&as_alice, "button[value=preview]").await;
        let refused = text_of(&as_alice).await;
        assert!(refused.contains("Cannot install") && refused.contains("forbidden") && refused.contains("team-b") && refused.contains("alice"), "the API server's refusal, in words: {refused}");
        shot(&as_alice, "refused").await;
        as_alice.close().await.expect("close");

        // The URL works once: a new browser with it gets no session.
        let again = browser(driver_port).await;
        again.goto(&url).await.expect("open");
        let source = again.source().await.expect("source");
        assert!(source.contains("its token works once"), "{source}");
        again.close().await.expect("close");
    });
    let down = env.down();
    assert!(down.status.success(), "olm dev down --purge: {}", String::from_utf8_lossy(&down.stderr));
}
