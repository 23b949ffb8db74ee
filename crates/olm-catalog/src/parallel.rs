//! Order-keeping parallel maps on scoped threads (no thread pool dependency).

/// Like [`parallel_map`], consuming the items.
pub(crate) fn parallel_map_owned<T: Send, R: Send>(
    items: Vec<T>,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let cells: Vec<std::sync::Mutex<Option<T>>> = items
        .into_iter()
        .map(|t| std::sync::Mutex::new(Some(t)))
        .collect();
    parallel_map(&cells, |cell| {
        let item = cell.lock().ok().and_then(|mut g| g.take());
        item.map(&f)
    })
    .into_iter()
    .flatten()
    .collect()
}

/// Map `f` over `items` on all available cores, keeping order.
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let results = std::sync::Mutex::new(Vec::with_capacity(items.len()));
    let work = || {
        let mut local = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= items.len() {
                break;
            }
            local.push((i, f(&items[i])));
        }
        if let Ok(mut r) = results.lock() {
            r.extend(local);
        }
    };
    // The calling thread is one of the workers: one thread (and, with glibc, one
    // malloc arena holding freed memory) fewer.
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    for (i, r) in results.into_inner().unwrap_or_default() {
        slots[i] = Some(r);
    }
    // Every index was claimed by exactly one worker, so every slot is filled.
    slots.into_iter().flatten().collect()
}
