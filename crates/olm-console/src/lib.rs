//! `olm console` (issue #55): an OperatorHub-style web console for any cluster, served on
//! 127.0.0.1 by the `olm` binary and acting with the user's own kubeconfig credentials — what
//! the user may not do, the page cannot do either; nothing runs in the cluster, nothing is
//! stored. Pages are rendered here (no script builds them); the one script only refreshes.
//!
//! - [`session`]: the one-time URL, the session cookie, Host and Origin checks, the headers;
//! - [`catalog`], [`package`], [`install`], [`installed`], [`instance`], [`review`], [`remove`]: the pages,
//!   pure renderers of what [`cluster`] reads;
//! - [`html`]: escaping, catalog Markdown made safe, the page frame.

pub mod catalog;
pub mod cluster;
pub mod html;
pub mod install;
pub mod installed;
pub mod instance;
pub mod package;
pub mod remove;
pub mod review;
pub mod session;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;

pub use session::Session;

/// What every handler has: the user's client, and the namespace to show when the user may
/// not list all (the kubeconfig's, or `-n`).
#[derive(Clone)]
struct Console {
    client: kube::Client,
    namespace: String,
}

/// The console's routes, every one behind the session guard; `namespace` is where a user who
/// may not list every namespace is shown.
pub fn router(client: kube::Client, namespace: String, session: Arc<Session>) -> Router {
    Router::new()
        .route("/", get(catalog_page))
        .route("/package/{namespace}/{name}", get(package_page))
        .route("/icon/{namespace}/{name}", get(icon))
        .route("/install/{namespace}/{name}", get(install_form).post(install_submit))
        .route("/installed", get(installed_page))
        .route("/events/installed", get(installed_events))
        .route("/instance/{namespace}/{csv}/{kind}", get(instance_form).post(instance_submit))
        .route("/plan/{namespace}/{name}", get(review_page))
        .route("/plan/{namespace}/{name}/approve", axum::routing::post(approve))
        .route("/uninstall/{namespace}/{name}", get(uninstall_page).post(uninstall_submit))
        .route("/rollback/{namespace}/{name}", get(rollback_page).post(rollback_submit))
        .route("/assets/style.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("assets/style.css")) }))
        .route("/assets/app.js", get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("assets/app.js")) }))
        .with_state(Console { client, namespace })
        .layer(axum::middleware::from_fn_with_state(session, session::guard))
}

/// Serves the console on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    client: kube::Client,
    namespace: String,
    session: Arc<Session>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(client, namespace, session)).with_graceful_shutdown(shutdown).await
}

fn html_page(title: &str, body: &str) -> Response {
    Html(html::page(title, body)).into_response()
}

fn failure(status: StatusCode, title: &str, message: &str) -> Response {
    (status, Html(html::page(title, &format!("<p class=\"error\" role=\"alert\">{}</p>", html::escape(message))))).into_response()
}

async fn catalog_page(State(console): State<Console>, Query(filters): Query<catalog::Filters>) -> Response {
    match cluster::package_manifests(&console.client, &console.namespace).await {
        Ok((manifests, note)) => html_page("Catalog", &catalog::page(&catalog::cards(&manifests), &filters, note.as_deref())),
        Err(message) => failure(StatusCode::BAD_GATEWAY, "Catalog", &message),
    }
}

async fn package_page(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>) -> Response {
    match cluster::package_manifest(&console.client, &namespace, &name).await {
        Ok(manifest) => {
            let title = catalog::Card::of(&manifest).display_name;
            html_page(&title, &package::page(&manifest))
        }
        Err(message) => failure(StatusCode::NOT_FOUND, "Package", &message),
    }
}

/// A package's icon, with its declared media type when it is an image type; sandboxed.
async fn icon(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>) -> Response {
    use base64::Engine as _;
    const IMAGES: [&str; 5] = ["image/png", "image/jpeg", "image/gif", "image/svg+xml", "image/webp"];
    let Ok(manifest) = cluster::package_manifest(&console.client, &namespace, &name).await else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let icon = manifest.shown_channel().and_then(|c| c.current_csv_desc.icon.iter().find(|i| !i.base64_data.is_empty()).cloned());
    let Some(icon) = icon else { return StatusCode::NOT_FOUND.into_response() };
    let media_type = icon.media_type.trim().to_ascii_lowercase();
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(icon.base64_data.trim()) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if !IMAGES.contains(&media_type.as_str()) {
        return StatusCode::NOT_FOUND.into_response();
    }
    // An SVG opened on its own runs nothing: no script, a sandbox.
    // Kept a while by the browser: a catalog page shows hundreds of them.
    (
        [
            (header::CONTENT_TYPE, media_type),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; sandbox".to_owned()),
            (header::CACHE_CONTROL, "private, max-age=600".to_owned()),
        ],
        bytes,
    )
        .into_response()
}

async fn install_form(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>) -> Response {
    match cluster::package_manifest(&console.client, &namespace, &name).await {
        Ok(manifest) => {
            let title = format!("Install {}", catalog::Card::of(&manifest).display_name);
            html_page(&title, &install::form_page(&manifest, &install::InstallForm::default(), None))
        }
        Err(message) => failure(StatusCode::NOT_FOUND, "Install", &message),
    }
}

async fn install_submit(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>, Form(form): Form<install::InstallForm>) -> Response {
    let manifest = match cluster::package_manifest(&console.client, &namespace, &name).await {
        Ok(manifest) => manifest,
        Err(message) => return failure(StatusCode::NOT_FOUND, "Install", &message),
    };
    let title = format!("Install {}", catalog::Card::of(&manifest).display_name);
    let target = match cluster::target(&console.client, form.namespace.trim()).await {
        Ok(target) => target,
        Err(message) => return html_page(&title, &install::form_page(&manifest, &form, Some(&message))),
    };
    let plan = match install::plan(&manifest, &form, &target) {
        Ok(plan) => plan,
        Err(message) => return html_page(&title, &install::form_page(&manifest, &form, Some(&message))),
    };
    if form.action == "create" {
        return match cluster::create(&console.client, &plan.objects).await {
            Ok(()) => Redirect::to(&format!("/installed#{}", html::query_value(form.namespace.trim()))).into_response(),
            Err(message) => html_page(&title, &install::form_page(&manifest, &form, Some(&message))),
        };
    }
    let yaml = plan.objects.iter().map(|o| serde_saphyr::to_string(o).unwrap_or_default()).collect::<Vec<_>>().join("---\n");
    let dry_run = cluster::dry_run(&console.client, &plan.objects, target.namespace_exists).await;
    html_page(&title, &install::preview_page(&manifest, &form, &plan, &yaml, &dry_run))
}

async fn installed_page(State(console): State<Console>) -> Response {
    match cluster::installed(&console.client, &console.namespace).await {
        Ok(seen) => {
            let live = format!("/events/installed?subscriptions={}&csvs={}", html::query_value(&seen.versions.0), html::query_value(&seen.versions.1));
            let body = installed::page(&installed::rows(&seen.subscriptions, &seen.csvs), seen.note.as_deref());
            Html(html::live_page("Installed", &body, Some(&live))).into_response()
        }
        Err(message) => failure(StatusCode::BAD_GATEWAY, "Installed", &message),
    }
}

/// The lists an Installed page showed, by resourceVersion.
#[derive(serde::Deserialize)]
struct Seen {
    #[serde(default)]
    subscriptions: String,
    #[serde(default)]
    csvs: String,
}

/// Server-sent events for the Installed page: `changed` when a Subscription or CSV changed
/// since the lists it showed.
async fn installed_events(State(console): State<Console>, Query(seen): Query<Seen>) -> Response {
    use futures::StreamExt as _;
    let scope = cluster::installed_scope(&console.client, &console.namespace).await;
    let changes = cluster::installed_changes(console.client.clone(), scope, (seen.subscriptions, seen.csvs))
        .map(|()| Ok::<_, std::convert::Infallible>(axum::response::sse::Event::default().event("changed").data("installed")));
    axum::response::sse::Sse::new(changes).keep_alive(axum::response::sse::KeepAlive::default()).into_response()
}

async fn review_page(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>) -> Response {
    match olm_controllers::plan_preview::preview_of(&console.client, &namespace, &name).await {
        Ok((plan, preview)) => html_page(&format!("Review InstallPlan {name}"), &review::page(&plan, &preview)),
        Err(message) => failure(StatusCode::NOT_FOUND, "Review", &message),
    }
}

/// Approves the plan as the user (`spec.approved: true`), then shows the Installed page.
async fn approve(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>) -> Response {
    match cluster::approve(&console.client, &namespace, &name).await {
        Ok(()) => Redirect::to("/installed").into_response(),
        Err(message) => failure(StatusCode::FORBIDDEN, "Approve", &message),
    }
}

/// The form to create an instance of `kind`, filled with the CSV's example of it.
async fn instance_form(State(console): State<Console>, Path((namespace, csv, kind)): Path<(String, String, String)>) -> Response {
    let title = format!("Create {kind}");
    let example = async {
        let found = cluster::csv(&console.client, &namespace, &csv).await?;
        let api_version = instance::examples(&found)?.into_iter().find(|e| e["kind"] == kind.as_str()).and_then(|e| e["apiVersion"].as_str().map(str::to_owned));
        let placed = instance_namespace(&console.client, api_version, &kind, &namespace).await?;
        instance::example_for(&found, &kind, placed)
    };
    match example.await {
        Ok(example) => {
            let yaml = serde_saphyr::to_string(&example).unwrap_or_default();
            html_page(&title, &instance::page(&namespace, &csv, &kind, &yaml, instance::Outcome::Fresh))
        }
        Err(message) => failure(StatusCode::NOT_FOUND, &title, &message),
    }
}

/// Where an instance of `kind` goes: the operator's `namespace` when the cluster serves the
/// kind (of `api_version`) namespaced, none when cluster-scoped. Without an apiVersion to look
/// up, the namespace: the form then says what is missing.
async fn instance_namespace<'a>(client: &kube::Client, api_version: Option<String>, kind: &str, namespace: &'a str) -> Result<Option<&'a str>, String> {
    let namespaced = match api_version {
        Some(api_version) => cluster::served_kind(client, &api_version, kind).await?.1,
        None => true,
    };
    Ok(namespaced.then_some(namespace))
}

#[derive(serde::Deserialize)]
struct InstanceForm {
    #[serde(default)]
    yaml: String,
    #[serde(default)]
    action: String,
}

/// Checks (server-side dry run) or creates what the user submitted, as the user.
async fn instance_submit(
    State(console): State<Console>,
    Path((namespace, csv, kind)): Path<(String, String, String)>,
    Form(form): Form<InstanceForm>,
) -> Response {
    let title = format!("Create {kind}");
    let submitted = async {
        let api_version = serde_saphyr::from_str::<serde_json::Value>(&form.yaml).ok().and_then(|v| v["apiVersion"].as_str().map(str::to_owned));
        let placed = instance_namespace(&console.client, api_version, &kind, &namespace).await?;
        let object = instance::object_from(&form.yaml, &kind, placed)?;
        cluster::create_instance(&console.client, &object, form.action != "create").await
    };
    let page = |outcome| html_page(&title, &instance::page(&namespace, &csv, &kind, &form.yaml, outcome));
    match submitted.await {
        Ok(created) if form.action == "create" => page(instance::Outcome::Created(&created)),
        Ok(_) => page(instance::Outcome::Accepted),
        Err(message) => page(instance::Outcome::Refused(&message)),
    }
}

/// A failed admin action as a page: a refusal is the user's to settle (409), the API server's
/// answer keeps its meaning (403 when forbidden), the rest is the cluster's (502).
fn admin_failure(title: &str, err: &olm_admin::AdminError) -> Response {
    let status = match err {
        olm_admin::AdminError::Refused(_) => StatusCode::CONFLICT,
        _ if err.category() == "ApiForbidden" => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_GATEWAY,
    };
    failure(status, title, &err.to_string())
}

/// How long the console waits for an uninstall's steps: the page answers when it is done.
const UNINSTALL_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// What uninstalling Subscription `namespace/name` deletes and keeps, with the options asked.
async fn uninstall_page(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>, Query(form): Query<remove::UninstallForm>) -> Response {
    let title = format!("Uninstall {name}");
    match olm_admin::uninstall::observe(&console.client, &namespace, &name).await {
        Ok(plan) => html_page(&title, &remove::uninstall_page(&namespace, &name, &plan.summary(form.options(), remove::OPTION_NAMES), form.options(), None)),
        Err(err) => admin_failure(&title, &err),
    }
}

/// Uninstalls, as the user, what the page showed (read again: the cluster may have changed).
async fn uninstall_submit(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>, Form(form): Form<remove::UninstallForm>) -> Response {
    let title = format!("Uninstall {name}");
    let plan = match olm_admin::uninstall::observe(&console.client, &namespace, &name).await {
        Ok(plan) => plan,
        Err(err) => return admin_failure(&title, &err),
    };
    let options = form.options();
    if form.confirm.as_deref() != Some("yes") {
        let summary = plan.summary(options, remove::OPTION_NAMES);
        return html_page(&title, &remove::uninstall_page(&namespace, &name, &summary, options, Some("tick the box to confirm what goes")));
    }
    let quiet = |_: &str| {};
    let waiting = olm_admin::Waiting { limit: UNINSTALL_WAIT, poll: std::time::Duration::from_secs(1), progress: &quiet };
    match olm_admin::uninstall::execute(&console.client, &plan, options, &waiting).await {
        Ok(done) => html_page(&title, &remove::uninstalled_page(&done.uninstalled, done.note.as_deref())),
        Err(err) => {
            let summary = plan.summary(options, remove::OPTION_NAMES);
            html_page(&title, &remove::uninstall_page(&namespace, &name, &summary, options, Some(&err.to_string())))
        }
    }
}

async fn rollback_page(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>) -> Response {
    let title = format!("Roll back {name}");
    match olm_admin::rollback::prepare(&console.client, &namespace, &name).await {
        Ok(olm_admin::rollback::Prepared::Ready(rollback)) => html_page(&title, &remove::rollback_page(&rollback)),
        Ok(olm_admin::rollback::Prepared::UnderWay { from }) => html_page(&title, &remove::message_page(&format!("A rollback from {from} is already under way."), false)),
        Err(err) => admin_failure(&title, &err),
    }
}

#[derive(serde::Deserialize)]
struct RollbackForm {
    #[serde(default)]
    from: String,
}

/// How long the console follows a rollback it asked for before showing the Installed page
/// (which follows it from there): long enough for OLM to refuse it or to plan it.
const ROLLBACK_FOLLOW: std::time::Duration = std::time::Duration::from_secs(20);

/// Asks OLM for the rollback the page showed; a refusal by OLM is taken back and said, a plan
/// that waits for approval is shown for review.
async fn rollback_submit(State(console): State<Console>, Path((namespace, name)): Path<(String, String)>, Form(form): Form<RollbackForm>) -> Response {
    use olm_admin::rollback::{self, Followed, Prepared};
    let title = format!("Roll back {name}");
    let client = &console.client;
    let rollback = match rollback::prepare(client, &namespace, &name).await {
        Ok(Prepared::Ready(rollback)) if rollback.from == form.from => rollback,
        Ok(Prepared::Ready(rollback)) => {
            let changed = format!("{} is installed now, not {}: nothing was asked; review the rollback again", rollback.from, form.from);
            return failure(StatusCode::CONFLICT, &title, &changed);
        }
        Ok(Prepared::UnderWay { .. }) => return Redirect::to("/installed").into_response(),
        Err(err) => return admin_failure(&title, &err),
    };
    if let Err(err) = rollback::request(client, &rollback).await {
        return admin_failure(&title, &err);
    }
    let quiet = |_: &str| {};
    let waiting = olm_admin::Waiting { limit: ROLLBACK_FOLLOW, poll: std::time::Duration::from_millis(500), progress: &quiet };
    match rollback::follow(client, &namespace, &name, &rollback.from, Some(&rollback.to), rollback.before.as_deref(), &waiting).await {
        Ok(Followed::Refused(said)) => html_page(&title, &remove::message_page(&said, true)),
        Ok(Followed::WaitsForApproval { plan }) => Redirect::to(&format!("/plan/{}/{}", html::query_value(&namespace), html::query_value(&plan))).into_response(),
        Ok(Followed::Done { csv }) => html_page(&title, &remove::message_page(&format!("Rolled back to {csv}."), false)),
        Ok(Followed::Going) => Redirect::to(&format!("/installed#{}", html::query_value(&namespace))).into_response(),
        Err(err) => admin_failure(&title, &err),
    }
}
