//! Bundle content read in the background. A bundle a catalog names by image only is pulled
//! before its InstallPlan is written (the plan's steps come from its manifests); a pull can
//! take seconds, or minutes from a slow registry. A reconcile waits a moment for it (a cached
//! or quick read never shows), then lets it go on in a task of its own and says so on the
//! Subscription (`BundleUnpacking`, naming the image), as upstream does while its unpack Job
//! runs; the namespace is not held meanwhile. When the pull ends, the Subscriptions waiting
//! for it are reconciled again and take its outcome. The OperatorGroup's
//! `operatorframework.io/bundle-unpack-timeout` bounds the pull.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use olm_catalog_client::{BundleContent, CatalogContent, ClientError};
use olm_resolver::Selected;
use tokio::sync::Notify;

/// Why no plan could be made from the catalog content.
#[derive(Debug, Clone)]
pub enum ContentError {
    /// A bundle image could not be pulled or read.
    Unpack(String),
    /// A bundle image is still being pulled: what to say meanwhile.
    Pending(String),
    /// Anything else about the content.
    Other(String),
    /// A rollback whose CRDs would not keep the objects stored now: why.
    RollbackRefused(String),
}

/// How long a reconcile waits for a pull before it says the bundle is unpacking.
const INLINE_WAIT: Duration = Duration::from_secs(2);
/// How long an outcome nobody took is kept (its Subscription was deleted meanwhile).
const UNCLAIMED: Duration = Duration::from_secs(600);

/// Namespace and name of a Subscription.
pub type SubKey = (String, String);

/// A bundle of a catalog.
type PullKey = (String, String);

struct Pull {
    started: Instant,
    /// The image, as the catalog names it (empty when the catalog names none).
    image: String,
    waiting: BTreeSet<SubKey>,
    /// Set when the read ended, with when.
    outcome: Option<(Result<BundleContent, ContentError>, Instant)>,
}

/// What reading a bundle gave so far.
pub enum PullOutcome {
    Ready(BundleContent),
    Failed(ContentError),
    /// Still reading: what the Subscription says meanwhile.
    Pending(String),
}

/// The bundle reads in flight and their outcomes, shared by the Subscription controller's
/// reconciles.
#[derive(Clone, Default)]
pub struct BundlePulls {
    pulls: Arc<Mutex<HashMap<PullKey, Pull>>>,
    listeners: Arc<Mutex<Vec<mpsc::UnboundedSender<SubKey>>>>,
}

impl BundlePulls {
    /// The content of `bundle` from `content` for the Subscription `sub`: at once when it can
    /// be read within [`INLINE_WAIT`], else `Pending` while a task goes on reading it. A read
    /// that failed less than `retry` ago is not tried again: its failure is the answer. (Each
    /// end of a read wakes the Subscriptions waiting for it; a registry that refuses at once
    /// made that a loop of pulls, dozens a second.)
    pub async fn read(
        &self,
        content: &Arc<CatalogContent>,
        bundle: &Selected,
        sub: SubKey,
        timeout: Option<Duration>,
        retry: Duration,
    ) -> PullOutcome {
        let key = (bundle.catalog.to_string(), bundle.name.clone());
        let done = {
            let mut pulls = self.pulls.lock().unwrap_or_else(|p| p.into_inner());
            pulls.retain(|_, p| match &p.outcome {
                None => true,
                Some((Ok(_), at)) => at.elapsed() < UNCLAIMED,
                Some((Err(_), at)) => at.elapsed() < retry.min(UNCLAIMED),
            });
            match pulls.get_mut(&key) {
                Some(pull) if pull.outcome.is_some() => return take(&mut pulls, &key),
                Some(pull) => {
                    pull.waiting.insert(sub);
                    return PullOutcome::Pending(pending_message(bundle, pull));
                }
                None => {
                    let done = Arc::new(Notify::new());
                    let image = catalog_image(content, bundle);
                    let waiting = BTreeSet::from([sub]);
                    pulls.insert(key.clone(), Pull { started: Instant::now(), image, waiting, outcome: None });
                    self.spawn(key.clone(), content.clone(), bundle.clone(), timeout, done.clone());
                    done
                }
            }
        };
        // A cached or quick read is used at once, without saying "unpacking".
        let finished = tokio::time::timeout(INLINE_WAIT, done.notified()).await.is_ok();
        let mut pulls = self.pulls.lock().unwrap_or_else(|p| p.into_inner());
        match pulls.get(&key) {
            Some(pull) if finished || pull.outcome.is_some() => take(&mut pulls, &key),
            Some(pull) => PullOutcome::Pending(pending_message(bundle, pull)),
            // Taken by another Subscription waiting for the same bundle: read again (the
            // image is cached now).
            None => PullOutcome::Pending(format!("reading bundle {} from catalog {}", bundle.name, bundle.catalog)),
        }
    }

    fn spawn(&self, key: PullKey, content: Arc<CatalogContent>, bundle: Selected, timeout: Option<Duration>, done: Arc<Notify>) {
        let this = self.clone();
        tokio::spawn(async move {
            let read = content.bundle(&bundle.package, &bundle.channel, &bundle.name);
            let outcome = match timeout {
                Some(limit) => match tokio::time::timeout(limit, read).await {
                    Ok(read) => classify(&bundle, read),
                    Err(_) => Err(ContentError::Unpack(format!(
                        "unpacking bundle {} from catalog {} did not finish within {}s, the OperatorGroup's {} annotation: raise it, or check the registry",
                        bundle.name,
                        bundle.catalog,
                        limit.as_secs(),
                        olm_api::keys::BUNDLE_UNPACK_TIMEOUT_ANNOTATION
                    ))),
                },
                None => classify(&bundle, read.await),
            };
            let waiting = {
                let mut pulls = this.pulls.lock().unwrap_or_else(|p| p.into_inner());
                match pulls.get_mut(&key) {
                    Some(pull) => {
                        pull.outcome = Some((outcome, Instant::now()));
                        std::mem::take(&mut pull.waiting)
                    }
                    None => BTreeSet::new(),
                }
            };
            done.notify_one();
            let mut listeners = this.listeners.lock().unwrap_or_else(|p| p.into_inner());
            for sub in waiting {
                listeners.retain(|tx| tx.unbounded_send(sub.clone()).is_ok());
            }
        });
    }

    /// The Subscriptions to reconcile because a pull they wait for ended.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<SubKey> {
        let (tx, rx) = mpsc::unbounded();
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        rx
    }
}

/// The image `content`'s catalog names for `bundle` (empty when it names none).
pub fn catalog_image(content: &CatalogContent, bundle: &Selected) -> String {
    content
        .catalog
        .package(&bundle.package)
        .and_then(|p| p.bundle(&bundle.name))
        .map(|b| b.image.clone())
        .unwrap_or_default()
}

/// The outcome of the ended read `key`: content is taken (whoever reads next reads again,
/// from the image cache); a failure stays, the answer until its retry interval is over.
fn take(pulls: &mut HashMap<PullKey, Pull>, key: &PullKey) -> PullOutcome {
    if let Some(Pull { outcome: Some((Err(err), _)), .. }) = pulls.get(key) {
        return PullOutcome::Failed(err.clone());
    }
    match pulls.remove(key).and_then(|p| p.outcome) {
        Some((Ok(content), _)) => PullOutcome::Ready(content),
        Some((Err(err), _)) => PullOutcome::Failed(err),
        None => PullOutcome::Pending(String::new()),
    }
}

fn pending_message(bundle: &Selected, pull: &Pull) -> String {
    let image = if pull.image.is_empty() { String::new() } else { format!(" image {}", pull.image) };
    format!(
        "pulling bundle {} (catalog {}){image}, for {}s so far; the InstallPlan gets its steps once its manifests are read",
        bundle.name,
        bundle.catalog,
        pull.started.elapsed().as_secs()
    )
}

/// An image that cannot be pulled or read is an unpack failure; anything else about the
/// catalog is a content error.
fn classify(bundle: &Selected, read: Result<BundleContent, ClientError>) -> Result<BundleContent, ContentError> {
    match read {
        Ok(content) => Ok(content),
        Err(err @ ClientError::Image { .. }) => {
            tracing::warn!(bundle = %bundle.name, error.category = err.category(), "cannot unpack bundle: {err}");
            Err(ContentError::Unpack(err.to_string()))
        }
        Err(err) => Err(ContentError::Other(format!("cannot read bundle {} from catalog {}: {err}", bundle.name, bundle.catalog))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(outcome: Result<BundleContent, ContentError>) -> Pull {
        Pull { started: Instant::now(), image: "r/b@sha256:1".into(), waiting: BTreeSet::new(), outcome: Some((outcome, Instant::now())) }
    }

    #[test]
    fn a_failure_stays_the_answer_and_content_is_taken_once() {
        let key: PullKey = ("olm/community".into(), "b.v1".into());
        let mut pulls = HashMap::from([(key.clone(), ended(Err(ContentError::Unpack("not found".into()))))]);
        // Every reader (the Subscriptions its end woke, each pass until the retry) gets the
        // failure; none starts another pull.
        for _ in 0..3 {
            assert!(matches!(take(&mut pulls, &key), PullOutcome::Failed(ContentError::Unpack(m)) if m == "not found"));
            assert!(pulls.contains_key(&key));
        }
        let content = BundleContent {
            name: "b.v1".into(),
            package: "b".into(),
            bundle_path: String::new(),
            csv_json: "{}".into(),
            objects: Vec::new(),
            properties_annotation: String::new(),
        };
        pulls.insert(key.clone(), ended(Ok(content)));
        assert!(matches!(take(&mut pulls, &key), PullOutcome::Ready(_)));
        assert!(!pulls.contains_key(&key));
    }
}
