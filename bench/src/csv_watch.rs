//! The scale run's view of every CSV's phase: a watch of its own, in process. A `kubectl get
//! -w` stream with a jsonpath decodes every CSV event whole (about 40 KiB each) in a process
//! that competes for the same two cores as the control plane it measures: at 1,000 namespaces
//! it fell minutes behind, and the API server closed it as an unresponsive watcher (its
//! `apiserver_terminated_watchers_total`), after which kubectl sat silent while every CSV had
//! long Succeeded. This one reads only names, labels and the phase of each event, and relists
//! when the API server ends its watch (kube-runtime's watcher).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;

/// A CSV as the scale run reads it: the rest of each event is skipped while parsing.
#[derive(Clone, Debug, Deserialize)]
struct CsvPhase {
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<CsvPhaseStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct CsvPhaseStatus {
    #[serde(default)]
    phase: Option<String>,
}

impl kube::Resource for CsvPhase {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ClusterServiceVersion".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "operators.coreos.com".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "clusterserviceversions".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One line per CSV event, as the kubectl stream printed them: `TYPE namespace name phase
/// copiedFrom=NS` (`ADDED` for every object of a relist).
fn line(kind: &str, csv: &CsvPhase) -> String {
    let meta = &csv.metadata;
    let copied = meta.labels.as_ref().and_then(|l| l.get("olm.copiedFrom")).map_or("", String::as_str);
    let phase = csv.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
    format!(
        "{kind} {} {} {phase} copiedFrom={copied}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Watch every CSV of the cluster `kubeconfig` reaches, from a thread of its own, sending each
/// event's line until the receiver is dropped. The watch is established (first list done) when
/// this returns.
pub(crate) fn start(kubeconfig: &Path) -> anyhow::Result<mpsc::Receiver<String>> {
    let (tx, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel::<anyhow::Result<()>>();
    let kubeconfig = kubeconfig.to_path_buf();
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(err) => {
                let _ = ready_tx.send(Err(err.into()));
                return;
            }
        };
        runtime.block_on(async move {
            let client = async {
                let config = kube::Config::from_custom_kubeconfig(
                    kube::config::Kubeconfig::read_from(&kubeconfig)?,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await?;
                anyhow::Ok(kube::Client::try_from(config)?)
            };
            let client = match client.await {
                Ok(client) => client,
                Err(err) => {
                    let _ = ready_tx.send(Err(err));
                    return;
                }
            };
            let mut ready = Some(ready_tx);
            // The watcher relists when the API server says Gone; the backoff paces a failing one.
            let mut events = watcher(kube::Api::<CsvPhase>::all(client), watcher::Config::default()).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let sent = match event {
                    Ok(watcher::Event::Apply(csv) | watcher::Event::InitApply(csv)) => tx.send(line("MODIFIED", &csv)),
                    Ok(watcher::Event::Delete(csv)) => tx.send(line("DELETED", &csv)),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(Ok(()));
                        }
                        tx.send(RELIST_DONE.to_owned())
                    }
                    Ok(watcher::Event::Init) => tx.send(RELIST.to_owned()),
                    Err(err) => {
                        eprintln!("  CSV watch: {err}; retrying");
                        // An empty line changes nothing; it fails once the run stopped reading
                        // (the cluster is going away), and the watch ends with it.
                        tx.send(String::new())
                    }
                };
                if sent.is_err() {
                    return;
                }
            }
        });
    });
    ready_rx.recv()??;
    Ok(rx)
}

/// The line that starts a (re)list: what it lists replaces the state when [`RELIST_DONE`]
/// comes, so that CSVs deleted while the watch was down are gone from it too.
const RELIST: &str = "RELIST";
const RELIST_DONE: &str = "RELIST-DONE";

/// What the all-namespaces CSV watch knows: (namespace, name) → (phase, copied).
#[derive(Default)]
pub(crate) struct CsvState {
    pub(crate) csvs: HashMap<(String, String), (String, bool)>,
    /// What a relist under way has listed so far.
    relisted: Option<HashMap<(String, String), (String, bool)>>,
    /// Relists seen (the first list included).
    pub(crate) lists: usize,
}

impl CsvState {
    pub(crate) fn apply(&mut self, line: &str) {
        if line == RELIST {
            self.relisted = Some(HashMap::new());
            return;
        }
        if line == RELIST_DONE {
            if let Some(listed) = self.relisted.take() {
                self.csvs = listed;
            }
            self.lists += 1;
            return;
        }
        let csvs = self.relisted.as_mut().unwrap_or(&mut self.csvs);
        let mut parts = line.split_whitespace();
        let (Some(event), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else { return };
        let mut phase = String::new();
        let mut copied = false;
        for p in parts {
            if let Some(c) = p.strip_prefix("copiedFrom=") {
                copied = !c.is_empty();
            } else {
                phase = p.to_string();
            }
        }
        let key = (ns.to_string(), name.to_string());
        if event == "DELETED" {
            csvs.remove(&key);
        } else {
            csvs.insert(key, (phase, copied));
        }
    }
    pub(crate) fn succeeded(&self, ns: &str, name: &str) -> bool {
        self.csvs.get(&(ns.to_string(), name.to_string())).is_some_and(|(p, _)| p == "Succeeded")
    }
    pub(crate) fn copied(&self) -> usize {
        self.csvs.values().filter(|(_, c)| *c).count()
    }
}

/// Keep the CSV state current for `wait`, from the scale run's own watch (`csv_watch`).
pub(crate) fn drain(watch: &mpsc::Receiver<String>, state: &mut CsvState, wait: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match watch.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(line) => state.apply(&line),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the CSV watch ended"),
        }
        if Instant::now() >= until {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_reads_as_the_kubectl_line_did() {
        let csv: CsvPhase = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"namespace": "ns1", "name": "etcd.v1", "labels": {"olm.copiedFrom": "ops"}},
            "spec": {"displayName": "skipped", "install": {"strategy": "deployment"}},
            "status": {"phase": "Succeeded", "reason": "Copied"}
        }))
        .unwrap();
        assert_eq!(line("MODIFIED", &csv), "MODIFIED ns1 etcd.v1 Succeeded copiedFrom=ops");
        let fresh: CsvPhase = serde_json::from_value(serde_json::json!({"metadata": {"namespace": "ns1", "name": "a.v1"}})).unwrap();
        assert_eq!(line("ADDED", &fresh), "ADDED ns1 a.v1  copiedFrom=");
    }

    #[test]
    fn a_relist_replaces_what_the_watch_knew() {
        let mut state = CsvState::default();
        for l in [RELIST, "MODIFIED ns1 a.v1 Succeeded copiedFrom=", "MODIFIED ns2 a.v1 Pending copiedFrom=ns1", RELIST_DONE] {
            state.apply(l);
        }
        assert_eq!(state.csvs.len(), 2);
        // The watch went down; ns2's copy was deleted meanwhile and ns1's CSV moved on.
        state.apply(RELIST);
        state.apply("MODIFIED ns1 a.v1 Failed copiedFrom=");
        assert!(state.succeeded("ns1", "a.v1"), "a relist under way changes nothing yet");
        state.apply(RELIST_DONE);
        assert!(!state.succeeded("ns1", "a.v1"));
        assert_eq!(state.csvs.len(), 1, "what the relist did not list is gone");
        assert_eq!((state.lists, state.copied()), (2, 0));
    }
}
