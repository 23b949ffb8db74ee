//! The output of a pure `decide` function: what to do, the status to write, the Events to
//! publish and when to look again.

use std::time::Duration;

use super::events::EventNote;

/// What a reconcile decided, before anything is done.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision<A, S> {
    /// Effects to apply, in order.
    pub actions: Vec<A>,
    /// The full desired status, written once (and only when it changed).
    pub status: Option<S>,
    /// Events to publish after the actions succeeded.
    pub events: Vec<EventNote>,
    /// Look at the object again after this long even if nothing changes.
    pub requeue_after: Option<Duration>,
}

impl<A, S> Decision<A, S> {
    /// A decision that keeps `status` and does nothing else.
    pub fn status(status: S) -> Self {
        Self {
            actions: Vec::new(),
            status: Some(status),
            events: Vec::new(),
            requeue_after: None,
        }
    }

    /// Add an action.
    pub fn act(mut self, action: A) -> Self {
        self.actions.push(action);
        self
    }

    /// Add an Event.
    pub fn event(mut self, note: EventNote) -> Self {
        self.events.push(note);
        self
    }

    /// Ask to look again after `after` (the shorter of two requests wins).
    pub fn requeue(mut self, after: Duration) -> Self {
        self.requeue_after = Some(self.requeue_after.map_or(after, |current| current.min(after)));
        self
    }
}
