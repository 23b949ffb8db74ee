//! Kubernetes Events (`events.k8s.io/v1`) with PascalCase reasons; a repeat within six minutes
//! counts on the first Event's `series`, with a bounded memory of what was published.
//! Publishing is best effort: a failed Event is logged, never fails a reconcile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// Severity of an Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Something expected happened.
    Normal,
    /// Something needs attention.
    Warning,
}

/// An Event a decision asks for: what happened (`reason`, PascalCase), what we did (`action`,
/// PascalCase) and a human message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNote {
    /// Normal or Warning.
    pub severity: Severity,
    /// PascalCase reason, e.g. `InstallSucceeded`.
    pub reason: String,
    /// PascalCase action, e.g. `Transition`.
    pub action: String,
    /// Message shown by `kubectl describe`.
    pub message: String,
}

impl EventNote {
    /// A Normal event.
    pub fn normal(reason: impl Into<String>, action: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Normal,
            reason: reason.into(),
            action: action.into(),
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: impl Into<String>, action: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::normal(reason, action, message)
        }
    }
}

/// How long a repeated Event is counted on the existing object (its `series`) instead of
/// creating a new one: kube's and client-go's recorders use six minutes too.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Most Events remembered for counting repeats. kube's `Recorder` keeps every Event it
/// published for the whole window, whole: memory that grows with the number of objects (so
/// with namespaces). Past the bound the oldest are forgotten, and a repeat of one of those
/// starts a new Event, which loses nothing a user reads.
const SERIES_LIMIT: usize = 1024;

/// What makes two Events the same one repeated. Only its hash is remembered
/// ([`SeriesKey::id`]): the strings would cost far more than the Event name kept with it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    regarding_uid: String,
    regarding: String,
    reason: String,
    action: String,
    warning: bool,
    /// The message too: a new message is new information, never folded into an old Event.
    message: String,
}

impl SeriesKey {
    /// A 64-bit hash of the key: two different Events collide with odds of about 1 in 10^13
    /// among the 1024 remembered, and a collision only counts a repeat on the wrong Event.
    fn id(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        self.hash(&mut hasher);
        hasher.finish()
    }
}

/// A published Event, as much as a repeat needs to count on it.
struct Published {
    name: String,
    count: i32,
    last: Instant,
}

/// Publishes Events for one controller (the reporting controller name, e.g. `olm/csv`).
#[derive(Clone)]
pub struct EventPublisher {
    client: Client,
    controller: String,
    instance: String,
    recent: Arc<Mutex<HashMap<u64, Published>>>,
}

impl EventPublisher {
    /// A publisher reporting as `controller`, with `instance` (pod name) when known.
    pub fn new(client: Client, controller: impl Into<String>, instance: Option<String>) -> Self {
        let controller = controller.into();
        Self {
            client,
            instance: instance.unwrap_or_else(|| controller.clone()),
            controller,
            recent: Arc::default(),
        }
    }

    /// Publish `note` about `regarding`: a new Event, or one more count on the same Event
    /// published less than six minutes ago. The request is sent in the background: Events are
    /// best effort, and a reconcile that waited for one would hold its object's next pass (and
    /// the install it is part of) behind a write nobody waits for.
    pub async fn publish(&self, regarding: &ObjectReference, note: &EventNote) {
        // The events API caps the note at 1 kB.
        let mut message = note.message.clone();
        if message.len() > 1000 {
            let mut cut = 1000;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let key = SeriesKey {
            regarding_uid: regarding.uid.clone().unwrap_or_default(),
            regarding: format!(
                "{}/{}/{}",
                regarding.kind.as_deref().unwrap_or_default(),
                namespace,
                regarding.name.as_deref().unwrap_or_default()
            ),
            reason: note.reason.clone(),
            action: note.action.clone(),
            warning: note.severity == Severity::Warning,
            message: message.clone(),
        }
        .id();
        let now = Instant::now();
        let wall = Timestamp::now();
        // The series is counted here, before the request goes: a repeat published meanwhile
        // counts on the same Event (whose name is chosen here) instead of creating another.
        let (name, repeat) = {
            let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            recent.retain(|_, p| now.duration_since(p.last) < SERIES_WINDOW);
            match recent.get_mut(&key) {
                Some(p) => {
                    p.count += 1;
                    p.last = now;
                    (p.name.clone(), Some(p.count))
                }
                None => {
                    let name = format!("{}.{:x}", regarding.name.as_deref().unwrap_or(&self.controller), wall.as_nanosecond());
                    recent.insert(key, Published { name: name.clone(), count: 1, last: now });
                    let over = recent.len().saturating_sub(SERIES_LIMIT);
                    if over > 0 {
                        forget_oldest(&mut recent, over);
                    }
                    (name, None)
                }
            }
        };
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let event = repeat.is_none().then(|| K8sEvent {
            metadata: ObjectMeta {
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(wall)),
            action: Some(note.action.clone()),
            reason: Some(note.reason.clone()),
            note: Some(message),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(match note.severity {
                Severity::Normal => "Normal".to_owned(),
                Severity::Warning => "Warning".to_owned(),
            }),
            ..Default::default()
        });
        let recent = self.recent.clone();
        let reason = note.reason.clone();
        tokio::spawn(async move {
            let result = match (repeat, event) {
                (Some(count), _) => {
                    let patch = json!({"series": {"count": count, "lastObservedTime": MicroTime(wall)}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
                }
                (None, Some(event)) => api.create(&PostParams::default(), &event).await.map(|_| ()),
                (None, None) => Ok(()),
            };
            match result {
                Ok(()) => {}
                // The namespace is going away with the object: nobody will read the Event.
                Err(kube::Error::Api(status)) if status.message.contains("is being terminated") => {
                    tracing::debug!(%reason, "event not published: namespace terminating");
                }
                Err(err) => {
                    // A series whose Event was never created or was deleted meanwhile starts
                    // again next time.
                    recent.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    tracing::warn!(%err, %reason, "cannot publish event");
                }
            }
        });
    }
}

fn forget_oldest(recent: &mut HashMap<u64, Published>, count: usize) {
    let mut by_age: Vec<(Instant, u64)> = recent.iter().map(|(k, p)| (p.last, *k)).collect();
    by_age.sort_by_key(|(last, _)| *last);
    for (_, key) in by_age.into_iter().take(count) {
        recent.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> u64 {
        SeriesKey {
            regarding_uid: format!("uid-{n}"),
            regarding: format!("ClusterServiceVersion/ns-{n}/csv"),
            reason: "InstallSucceeded".into(),
            action: "Transition".into(),
            warning: false,
            message: "install strategy completed with no errors".into(),
        }
        .id()
    }

    #[test]
    fn the_oldest_published_events_are_forgotten_first() {
        let start = Instant::now();
        let mut recent: HashMap<u64, Published> = (0..10)
            .map(|n| {
                let last = start + Duration::from_millis(n as u64);
                (key(n), Published { name: format!("e{n}"), count: 1, last })
            })
            .collect();
        forget_oldest(&mut recent, 4);
        assert_eq!(recent.len(), 6);
        assert!((0..4).all(|n| !recent.contains_key(&key(n))), "the four oldest go");
        assert!((4..10).all(|n| recent.contains_key(&key(n))));
    }
}
