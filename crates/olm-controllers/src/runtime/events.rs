//! Kubernetes Events (`events.k8s.io/v1`) through kube's `Recorder`, with PascalCase reasons.
//! Publishing is best effort: a failed Event is logged, never fails a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

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

/// Publishes Events for one controller (the reporting controller name, e.g. `olm/csv`).
#[derive(Clone)]
pub struct EventPublisher {
    recorder: Recorder,
}

impl EventPublisher {
    /// A publisher reporting as `controller`, with `instance` (pod name) when known.
    pub fn new(client: Client, controller: impl Into<String>, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.into(),
            instance,
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Publish `note` about `regarding`.
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
        let event = Event {
            type_: match note.severity {
                Severity::Normal => EventType::Normal,
                Severity::Warning => EventType::Warning,
            },
            reason: note.reason.clone(),
            note: Some(message),
            action: note.action.clone(),
            secondary: None,
        };
        match self.recorder.publish(&event, regarding).await {
            Ok(()) => {}
            // The namespace is going away with the object: nobody will read the Event.
            Err(kube::Error::Api(status)) if status.message.contains("is being terminated") => {
                tracing::debug!(reason = %note.reason, "event not published: namespace terminating");
            }
            Err(err) => tracing::warn!(%err, reason = %note.reason, "cannot publish event"),
        }
    }
}
