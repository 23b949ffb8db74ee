//! A shutdown signal that many tasks can wait on (controllers need a `Send + Sync` future).

use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::channel::oneshot;

#[derive(Default)]
struct Inner {
    fired: bool,
    waiters: Vec<oneshot::Sender<()>>,
}

/// Fires once; every future from [`Shutdown::signal`] completes then.
#[derive(Clone, Default)]
pub struct Shutdown {
    inner: Arc<Mutex<Inner>>,
}

impl Shutdown {
    /// A future that completes when shutdown is triggered (at once if it already was).
    pub fn signal(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.fired {
            let _ = tx.send(());
        } else {
            inner.waiters.push(tx);
        }
        rx.map(|_| ())
    }

    /// Trigger shutdown.
    pub fn trigger(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.fired = true;
        for waiter in inner.waiters.drain(..) {
            let _ = waiter.send(());
        }
    }

    /// Whether shutdown was triggered.
    pub fn is_triggered(&self) -> bool {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_waiter_wakes_including_late_ones() {
        let shutdown = Shutdown::default();
        let early = shutdown.signal();
        shutdown.trigger();
        early.await;
        shutdown.signal().await;
        assert!(shutdown.is_triggered());
    }
}
