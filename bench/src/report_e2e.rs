//! §3 of BENCHMARKS.md (end to end: single install with its timeline, scale run), the scale
//! goal row and the end-to-end lines of "Where we lose". Every number comes from the run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::e2e::{E2e, Scale, Settle, Side};
use crate::figures::{ms, ratio};

fn kib(v: f64) -> String {
    if v.abs() >= 1024.0 { format!("{:.2} MiB", v / 1024.0) } else { format!("{v:.1} KiB") }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn clean(e: &str) -> String {
    e.replace('\n', " ").replace('|', "/")
}

fn settled_both(r: &E2e) -> Option<(&Scale, &Scale)> {
    match (&r.upstream_scale, &r.ours_scale) {
        (Some(Ok(u)), Some(Ok(a))) if matches!(u.settle, Settle::Settled(_)) && matches!(a.settle, Settle::Settled(_)) => Some((u, a)),
        _ => None,
    }
}

/// The Goals table rows "controller memory per namespace ≤ 1/12": the scale run's average, and
/// what each namespace beyond its baseline's added.
pub fn scale_goal_row(e2e: Option<&Result<E2e, String>>) -> String {
    let average = scale_average_goal_row(e2e);
    let Some(Ok(r)) = e2e else { return average };
    let goal = "| controller memory per added namespace ≤ 1/12";
    let Some((Ok(u), Ok(a))) = r.upstream_scale.as_ref().zip(r.ours_scale.as_ref()) else { return average };
    let n = r.options.scale_namespaces;
    let measure = format!("(controllers' RSS growth at N − at N/10) / (N − N/10), N = {n}, fresh processes each");
    let row = match (a.added_per_namespace_kib(), u.added_per_namespace_kib()) {
        _ if settled_both(r).is_none() => format!("{goal} | {measure} | — | — | n/a | **not comparable** (a side did not settle, see §3) |"),
        (Some((x, _)), Some((y, _))) if y > 0.0 => {
            let ratio = x / y;
            format!("{goal} | {measure} | {} | {} | {ratio:.3} | {} |", kib(x), kib(y), if ratio <= 1.0 / 12.0 { "yes" } else { "**no**" })
        }
        _ => format!("{goal} | {measure} | — | — | n/a | **not measured** (a baseline run failed or did not settle, see §3) |"),
    };
    format!("{average}\n{row}")
}

fn scale_average_goal_row(e2e: Option<&Result<E2e, String>>) -> String {
    let goal = "| controller memory per namespace ≤ 1/12";
    let Some(Ok(r)) = e2e else {
        return format!("{goal} | scale run | — | — | n/a | **not measured** (see §3) |");
    };
    let n = r.options.scale_namespaces;
    let measure = format!("(controllers' RSS settled − idle) / N, {n}-namespace scale run");
    match (&r.upstream_scale, &r.ours_scale) {
        (None, _) | (_, None) => format!("{goal} | scale run | — | — | n/a | **not measured** (scale run skipped, see §3) |"),
        (Some(Err(_)), _) | (_, Some(Err(_))) => format!("{goal} | {measure} | — | — | n/a | **not measured** (a side failed, see §3) |"),
        (Some(Ok(u)), Some(Ok(a))) => {
            let (x, y) = (a.per_namespace_kib(), u.per_namespace_kib());
            if settled_both(r).is_none() {
                return format!("{goal} | {measure} | {} | {} | n/a | **not comparable** (a side did not settle, see §3) |", kib(x), kib(y));
            }
            if y <= 0.0 {
                return format!("{goal} | {measure} | {} | {} | n/a | **not comparable** (upstream's controllers did not grow) |", kib(x), kib(y));
            }
            let r = x / y;
            format!("{goal} | {measure} | {} | {} | {:.3} | {} |", kib(x), kib(y), r, if r <= 1.0 / 12.0 { "yes" } else { "**no**" })
        }
    }
}

/// The baseline runs beside the full ones: what the added namespaces cost, apart from what
/// the controllers grow by whatever their number.
fn added_per_namespace(o: &mut String, u: &Scale, a: &Scale) -> anyhow::Result<()> {
    writeln!(
        o,
        "What the added namespaces cost, apart from what the controllers grow by whatever their number (code run for \
         the first time, connection buffers, pools): each side ran the same scale run with a tenth of the namespaces \
         first, with fresh processes (its **baseline**), and per added namespace = (growth at N − growth at N/10) / \
         (N − N/10), settled readings.\n\n\
         | side | growth at N/10 (RSS / RssAnon) | growth at N (RSS / RssAnon) | per added namespace, RSS | per added namespace, RssAnon |\n|---|---|---|---|---|"
    )?;
    let mut added = Vec::new();
    for s in [u, a] {
        match &s.baseline {
            None => writeln!(o, "| {} | no baseline run (N < 20) | | | |", s.label)?,
            Some(Err(e)) => writeln!(o, "| {} | failed: {} | | | |", s.label, clean(e))?,
            Some(Ok(b)) => {
                let per = s.added_per_namespace_kib();
                added.push(per);
                let (rss, anon) = per.map_or(("n/a (the baseline did not settle)".to_owned(), String::new()), |(x, y)| (kib(x), kib(y)));
                writeln!(
                    o,
                    "| {} | {} namespaces: {:.1} / {:.1} MiB | {} namespaces: {:.1} / {:.1} MiB | {rss} | {anon} |",
                    s.label,
                    b.namespaces,
                    b.growth_mib,
                    b.growth_anon_mib,
                    s.namespaces,
                    s.controllers_settled() - s.controllers_idle(),
                    s.controllers(|m| m.settled_anon_mib) - s.controllers(|m| m.idle_anon_mib),
                )?;
            }
        }
    }
    if let [Some((ux, uy)), Some((ax, ay))] = added[..] {
        writeln!(o, "\nOurs/upstream per added namespace: RSS {}, RssAnon {}.", ratio(ax, ux), ratio(ay, uy))?;
    }
    writeln!(o)?;
    Ok(())
}

pub fn section_e2e(o: &mut String, e2e: Option<&Result<E2e, String>>) -> anyhow::Result<()> {
    writeln!(o, "## 3. End to end (Subscription → CSV Succeeded; scale run)\n")?;
    let r = match e2e {
        None => {
            writeln!(o, "Skipped in this run (`--no-e2e`).\n")?;
            return Ok(());
        }
        Some(Err(e)) => {
            writeln!(o, "The private control plane could not be started: {}\n", clean(e))?;
            return Ok(());
        }
        Some(Ok(r)) => r,
    };
    let g = &r.global;
    writeln!(
        o,
        "On a private olm-dev control plane (kube-apiserver {}, kube-controller-manager, kwok node; its own ports and state \
         directory, started in {}), upstream first, then ours, each with its own CRDs (deleted in between, with the CRDs the \
         installs created) and its own processes (started afresh for the single install and for the scale run), the global \
         catalog namespace `olm` and a CatalogSource whose `spec.address` points at the side's own gRPC catalog server on \
         loopback. Both servers serve the same catalog, target/olm-bench/e2e-catalog: the repository's catalogs/community \
         (package `etcd`) and a package `{}` generated from it for the AllNamespaces operator (etcd's cluster-wide channel head \
         with package, CSV name `{}` and API group `{}` renamed, one channel `{}`): etcd cannot be installed per namespace and \
         for all namespaces at once, both would provide EtcdCluster. No bundle carries an image, so upstream takes the manifests \
         from the gRPC answer and needs no unpack Job (which could not run here: pods are kwok fakes).\n",
        olm_dev::KUBERNETES_VERSION,
        ms(r.cluster_up),
        g.package,
        g.csv_name,
        g.group,
        g.channel
    )?;
    writeln!(
        o,
        "### Single install\n\nNamespace `e2e-SIDE-N` with an OperatorGroup targeting the namespace, then a \
         Subscription to etcd, channel singlenamespace-alpha, Automatic. Install time = from the Subscription's ADDED event to \
         {} Succeeded, both as they arrive on `kubectl get -w` streams started beforehand (same path at both ends; the \
         `kubectl apply` start-up before the ADDED event is shown apart and not counted). RSS 2 s later. Each side installs \
         {} times, each time from scratch (its CRDs installed, its processes started, a new namespace; all removed \
         afterwards): the median run is reported (its RSS and timeline below), every run's time is listed.\n",
        g.per_namespace_csv,
        r.options.single_runs.max(1)
    )?;
    writeln!(
        o,
        "| side | Subscription → CSV Succeeded (median) | every run | kubectl apply → ADDED (not counted) | RSS per process |\n|---|---|---|---|---|"
    )?;
    for (label, side) in [("upstream", &r.upstream), ("ours", &r.ours)] {
        match side {
            Ok(s) => writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                s.label,
                ms(s.install),
                s.runs.iter().map(|d| ms(*d)).collect::<Vec<_>>().join(", "),
                ms(s.apply_to_added),
                s.rss.iter().map(|(p, m)| format!("{p}: {m:.1} MiB")).collect::<Vec<_>>().join("; ")
            )?,
            Err(e) => writeln!(o, "| {label} | failed: {} | — | — | — |", clean(e))?,
        }
    }
    if let (Ok(u), Ok(a)) = (&r.upstream, &r.ours) {
        let total = |s: &Side| s.rss.iter().map(|(_, m)| m).sum::<f64>();
        writeln!(
            o,
            "\nInstall time ours/upstream: {}. Controllers + catalog server RSS ours/upstream: {:.1} / {:.1} MiB = {}.\n",
            ratio(a.install.as_secs_f64(), u.install.as_secs_f64()),
            total(a),
            total(u),
            ratio(total(a), total(u))
        )?;
    }
    timeline(o, r)?;
    if r.ours.is_ok() {
        writeln!(o, "{TIMELINE_CAUSES}\n")?;
    }
    scale_section(o, r)?;
    Ok(())
}

fn timeline(o: &mut String, r: &E2e) -> anyhow::Result<()> {
    let sides: Vec<(&str, &Side)> = [("upstream", &r.upstream), ("ours", &r.ours)]
        .into_iter()
        .filter_map(|(l, s)| s.as_ref().ok().map(|s| (l, s)))
        .collect();
    if sides.is_empty() {
        return Ok(());
    }
    writeln!(
        o,
        "### Where the single install's time goes\n\nFirst time each state was seen, in ms after the Subscription's ADDED event, \
         from `kubectl get -w --output-watch-events` streams on the namespace's Subscriptions, InstallPlans, CSVs and \
         Deployments started before it (time of arrival at the benchmark; a state an object passed through between two \
         events is not seen; watching goes on for 2 s after Succeeded). \"created\" is the object's first event, \
         `(none)` an empty field.\n"
    )?;
    // Rows: every step either side saw, in order of the earliest time it was seen.
    let mut steps: BTreeMap<&str, Vec<Option<Duration>>> = BTreeMap::new();
    for (i, (_, s)) in sides.iter().enumerate() {
        for (step, at) in &s.timeline {
            steps.entry(step.as_str()).or_insert_with(|| vec![None; sides.len()])[i] = Some(*at);
        }
    }
    let mut rows: Vec<(&str, Vec<Option<Duration>>)> = steps.into_iter().collect();
    rows.sort_by_key(|(_, ts)| ts.iter().flatten().min().copied().unwrap_or_default());
    write!(o, "| step |")?;
    for (l, _) in &sides {
        write!(o, " {l} |")?;
    }
    write!(o, "\n|---|")?;
    for _ in &sides {
        write!(o, "---|")?;
    }
    writeln!(o)?;
    for (step, ts) in rows {
        write!(o, "| {} |", step.replace('|', "/"))?;
        for t in ts {
            write!(o, " {} |", t.map_or("—".to_string(), |t| format!("{:.0}", t.as_secs_f64() * 1e3)))?;
        }
        writeln!(o)?;
    }
    writeln!(o)?;
    Ok(())
}

fn scale_section(o: &mut String, r: &E2e) -> anyhow::Result<()> {
    let opts = &r.options;
    let g = &r.global;
    writeln!(o, "### Scale run: {} namespaces and one AllNamespaces operator\n", opts.scale_namespaces)?;
    if opts.scale_namespaces == 0 {
        writeln!(o, "Skipped in this run (`--scale-namespaces 0`).\n")?;
        return Ok(());
    }
    writeln!(
        o,
        "Per side, with fresh processes: the CatalogSource READY, then {} idle → **idle** RSS. Then, from the first create: {} \
         namespaces, each with an OperatorGroup targeting itself and a Subscription to etcd (singlenamespace-alpha, Automatic), \
         plus namespace `scale-SIDE-global` with a global OperatorGroup (no targetNamespaces) and a Subscription to `{}` \
         (channel {}); created by {} concurrent `kubectl create -f` of multi-document files (each in order namespace, \
         OperatorGroup, Subscription). **Settled** = every namespace's {} and the global {} Succeeded, read from one \
         watch of every CSV in the benchmark's process (names, labels and phase only; a `kubectl get -w` stream fell minutes \
         behind on 2 busy cores at 1,000 namespaces, bench/src/csv_watch.rs); settled RSS 2 s after that, **steady** RSS {} later. Memory per namespace = \
         (controllers' settled RSS − idle RSS) / N, controllers being upstream's olm + catalog operators and our `olm run`; the \
         catalog server is listed but not counted. The cluster gets {} more fake kwok node(s) for the scale run (a node takes at most \
         {} pods; one operator pod per namespace). Copied CSVs = CSVs labelled `olm.copiedFrom` (upstream copies an \
         AllNamespaces operator's CSV into every namespace). Each side's wait is capped at {}.\n",
        secs(opts.idle_after),
        opts.scale_namespaces,
        g.package,
        g.channel,
        opts.create_concurrency,
        g.per_namespace_csv,
        g.csv_name,
        secs(opts.steady_after),
        r.extra_nodes,
        crate::e2e::PODS_PER_NODE,
        secs(opts.scale_timeout)
    )?;
    if let Some(every) = opts.catalog_updates {
        let updates = r.ours_scale.as_ref().and_then(|s| s.as_ref().ok()).map(|s| s.catalog_updates).unwrap_or_default();
        writeln!(
            o,
            "Ours with catalog updates: from the first create, the catalog gets a new bundle every {} (a package nobody \
             subscribes to gets one more version; the catalog server reloads its directory, the CatalogSource polls every 30 s), \
             so every Subscription on it resolves again: {} updates until settled, {} until the steady reading. Upstream's \
             `opm serve` cannot reload a directory: its side has none.\n",
            secs(every),
            updates.0,
            updates.1
        )?;
    }
    writeln!(
        o,
        "| side | objects created in | time to settle | controllers RSS idle → settled → steady | per namespace (settled) | per namespace (steady) | copied CSVs settled / steady | CSVs at steady |\n|---|---|---|---|---|---|---|---|"
    )?;
    let sides = [("upstream", &r.upstream_scale), ("ours", &r.ours_scale)];
    for (label, s) in sides {
        match s {
            None => {}
            Some(Err(e)) => writeln!(o, "| {label} | failed: {} | | | | | | |", clean(e))?,
            Some(Ok(s)) => {
                let settle = match &s.settle {
                    Settle::Settled(d) => secs(*d),
                    Settle::NotSettled { after, succeeded, global_succeeded } => format!(
                        "**not settled** after {}: {succeeded} of {} Succeeded, AllNamespaces operator {}",
                        secs(*after),
                        s.namespaces,
                        if *global_succeeded { "Succeeded" } else { "not Succeeded" }
                    ),
                };
                writeln!(
                    o,
                    "| {} | {} | {} | {:.1} → {:.1} → {:.1} MiB | {} | {} | {} / {} | {} |",
                    s.label,
                    secs(s.create),
                    settle,
                    s.controllers_idle(),
                    s.controllers_settled(),
                    s.controllers_steady(),
                    kib(s.per_namespace_kib()),
                    kib(s.per_namespace_steady_kib()),
                    s.copied_at_settle,
                    s.copied_at_end,
                    s.csvs_at_end
                )?;
            }
        }
    }
    writeln!(o, "\n| side | process | idle | settled | steady | peak (VmHWM) | anonymous (RssAnon) idle → settled |\n|---|---|---|---|---|---|---|")?;
    for (_, s) in sides {
        if let Some(Ok(s)) = s {
            for m in &s.memory {
                writeln!(
                    o,
                    "| {} | {}{} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} → {:.1} MiB |",
                    s.label,
                    m.label,
                    if m.controller { "" } else { " (not counted)" },
                    m.idle_mib,
                    m.settled_mib,
                    m.steady_mib,
                    m.peak_mib,
                    m.idle_anon_mib,
                    m.settled_anon_mib
                )?;
            }
        }
    }
    if let (Some(Ok(u)), Some(Ok(a))) = (&r.upstream_scale, &r.ours_scale) {
        let settle_ratio = match (&a.settle, &u.settle) {
            (Settle::Settled(x), Settle::Settled(y)) => ratio(x.as_secs_f64(), y.as_secs_f64()),
            _ => "n/a (a side did not settle)".to_string(),
        };
        writeln!(
            o,
            "\nOurs/upstream: memory per namespace {} (steady: {}; anonymous memory only, {} vs {} per namespace: {}); time to settle {}; controllers' settled RSS {}.\n\nRSS counts the pages of the executable too, which grow the first time code runs whatever the number of namespaces; RssAnon is the processes' own memory (heap, stacks).\n",
            ratio(a.per_namespace_kib(), u.per_namespace_kib()),
            ratio(a.per_namespace_steady_kib(), u.per_namespace_steady_kib()),
            kib(a.per_namespace_anon_kib()),
            kib(u.per_namespace_anon_kib()),
            ratio(a.per_namespace_anon_kib(), u.per_namespace_anon_kib()),
            settle_ratio,
            ratio(a.controllers_settled(), u.controllers_settled())
        )?;
        added_per_namespace(o, u, a)?;
    } else {
        writeln!(o)?;
    }
    inventory_table(o, r)?;
    followers_table(o, r)?;
    reconciles_table(o, r)?;
    if matches!(&r.ours_scale, Some(Ok(_))) {
        writeln!(o, "{SCALE_CAUSES}\n")?;
    }
    writeln!(
        o,
        "Logs: target/olm-bench/e2e-SIDE-{{single,scale}}-*.log (processes), e2e-ours-single-N-metrics.txt and \
         e2e-ours-scale-metrics-{{idle,settled,steady}}.txt (`olm run` /metrics after the install and at the three readings; \
         reconcile durations per controller), e2e-ours-scale-follower-*.log, e2e-SIDE-scale-objects/ (the created objects).\n"
    )?;
    Ok(())
}

/// The API objects behind the memory: per kind `olm run` caches, objects and compact-JSON size
/// before the creates and at the steady reading, per side.
fn inventory_table(o: &mut String, r: &E2e) -> anyhow::Result<()> {
    let sides: Vec<&Scale> = [&r.upstream_scale, &r.ours_scale].into_iter().filter_map(|s| s.as_ref().and_then(|s| s.as_ref().ok())).collect();
    if sides.is_empty() {
        return Ok(());
    }
    writeln!(
        o,
        "What the controllers have to keep: the API objects of every kind `olm run` holds a watch cache of (with its label \
         selector), counted on the cluster before the creates and after the steady reading, with their size as compact JSON \
         (a full watch cache keeps at least this much, decoded; upstream caches these kinds and more). Per namespace = \
         (steady − idle) / N.\n"
    )?;
    write!(o, "| kind |")?;
    for s in &sides {
        write!(o, " {}: objects | {}: JSON per namespace |", s.label, s.label)?;
    }
    write!(o, "\n|---|")?;
    for _ in &sides {
        write!(o, "---|---|")?;
    }
    writeln!(o)?;
    let kinds: Vec<&str> = sides[0].inventory_end.iter().map(|k| k.kind.as_str()).collect();
    let mut totals = vec![(0.0f64, 0.0f64); sides.len()];
    for kind in kinds {
        write!(o, "| {kind} |")?;
        for (i, s) in sides.iter().enumerate() {
            let find = |v: &[crate::e2e::KindCount]| v.iter().find(|k| k.kind == kind).map(|k| (k.objects, k.json_bytes, k.managed_fields_bytes));
            match (find(&s.inventory_idle), find(&s.inventory_end)) {
                (Some((oi, bi, mi)), Some((oe, be, me))) => {
                    let n = s.namespaces.max(1) as f64;
                    let per = (be as f64 - bi as f64) / 1024.0 / n;
                    let managed = (me as f64 - mi as f64) / 1024.0 / n;
                    totals[i].0 += per;
                    totals[i].1 += managed;
                    write!(o, " {oi} → {oe} | {} (managedFields {}) |", kib(per), kib(managed))?;
                }
                _ => write!(o, " — | — |")?,
            }
        }
        writeln!(o)?;
    }
    write!(o, "| **total** |")?;
    for (i, s) in sides.iter().enumerate() {
        write!(
            o,
            " | **{}** (managedFields {}; RSS per namespace, steady: {}) |",
            kib(totals[i].0),
            kib(totals[i].1),
            kib(s.per_namespace_steady_kib())
        )?;
    }
    writeln!(o, "\n")?;
    Ok(())
}

/// Ours: what the watch caches alone cost, from follower replicas.
fn followers_table(o: &mut String, r: &E2e) -> anyhow::Result<()> {
    let Some(Ok(s)) = &r.ours_scale else { return Ok(()) };
    if s.followers.is_empty() {
        return Ok(());
    }
    writeln!(
        o,
        "Where our memory per namespace goes: follower replicas of `olm run` (`--leader-elect` on a Lease the benchmark holds, \
         so they fill their watch caches but never reconcile), one per controller set, started before the creates and again \
         after the steady reading, RSS read 2 s after /readyz reports every cache listed. A follower's growth is what the \
         caches of those controllers cost; the leader's growth beyond the \"all\" follower's is the installing work's \
         (queues, per-object state, allocator).\n"
    )?;
    writeln!(o, "| `olm run --controllers` | RSS idle | RSS at end | per namespace |\n|---|---|---|---|")?;
    for (set, idle, end) in &s.followers {
        writeln!(o, "| {set} (follower) | {idle:.1} MiB | {end:.1} MiB | {} |", kib((end - idle) * 1024.0 / s.namespaces.max(1) as f64))?;
    }
    if let Some(m) = s.memory.iter().find(|m| m.controller) {
        writeln!(
            o,
            "| all (the leader that did the installs) | {:.1} MiB | {:.1} MiB | {} |",
            m.idle_mib,
            m.steady_mib,
            kib(s.per_namespace_steady_kib())
        )?;
    }
    writeln!(o)?;
    Ok(())
}

/// Ours: how much reconciling the scale run took, per controller (from /metrics when settled).
fn reconciles_table(o: &mut String, r: &E2e) -> anyhow::Result<()> {
    let Some(Ok(s)) = &r.ours_scale else { return Ok(()) };
    if s.reconciles.is_empty() {
        return Ok(());
    }
    writeln!(
        o,
        "Our controllers' work until settled (`olm_controller_reconcile_duration_seconds` _count and _sum from `olm run`'s \
         /metrics; reconciles of different objects overlap, so the time spent can exceed the wall time):\n"
    )?;
    writeln!(o, "| controller | reconciles | per namespace | time spent reconciling | mean per reconcile |\n|---|---|---|---|---|")?;
    for (controller, n, secs_spent) in &s.reconciles {
        writeln!(
            o,
            "| {controller} | {n} | {:.1} | {secs_spent:.1} s | {} |",
            *n as f64 / s.namespaces.max(1) as f64,
            if *n > 0 { format!("{:.1} ms", secs_spent / *n as f64 * 1e3) } else { "—".into() }
        )?;
    }
    writeln!(o)?;
    requests_paragraph(o, s)?;
    Ok(())
}

/// Ours: what the installs cost the API server, and what a restart writes.
/// The total of `writes` and their list in parentheses (empty when there are none).
fn writes_summary(writes: &[(String, u64)]) -> (u64, String) {
    let total = writes.iter().map(|(_, n)| n).sum();
    let shown: Vec<String> = writes.iter().map(|(kind, n)| format!("{kind}: {n}")).collect();
    (total, if shown.is_empty() { String::new() } else { format!(" ({})", shown.join(", ")) })
}

fn requests_paragraph(o: &mut String, s: &crate::e2e::Scale) -> anyhow::Result<()> {
    if !s.requests.is_empty() {
        let total: u64 = s.requests.iter().map(|(_, n)| n).sum();
        let installs = s.namespaces + 1;
        let by_verb: Vec<String> = s.requests.iter().map(|(verb, n)| format!("{verb} {n}")).collect();
        writeln!(
            o,
            "API requests `olm run` sent from the first create until settled (`olm_api_requests_total`, counted in its client): \
             {total}, **{:.1} per install** ({installs} installs; {}).\n",
            total as f64 / installs as f64,
            by_verb.join(", ")
        )?;
    }
    if let Some(host) = &s.host {
        writeln!(
            o,
            "The host's speed that day: a server-side apply of a small ConfigMap cost the idle API server **{:.1} ms** of CPU \
             ({} applies, its own {:.0} ms/s of idle use subtracted){}. The same writes cost it ~1.5× more on a slow day than \
             on a fast one, and the time to settle follows.\n",
            host.apply_ms,
            crate::host_speed::PROBE_WRITES,
            host.idle_ms_per_s,
            s.api_server_cpu_until_settle.map(|cpu| format!("; from the first create until settled the API server used {cpu:.0} s of CPU")).unwrap_or_default()
        )?;
    }
    if let Some(writes) = &s.writes_after_restart {
        let (total, shown) = writes_summary(writes);
        writeln!(
            o,
            "`olm run` restarted after the steady reading (SIGTERM, a new process): in the {} s after its caches synced it \
             sent **{total} writes** over {} namespaces where nothing had changed{}.\n",
            crate::e2e::RESTART_WATCH.as_secs(),
            s.namespaces,
            shown
        )?;
    }
    if let Some(writes) = &s.writes_before_restart {
        let (total, shown) = writes_summary(writes);
        writeln!(
            o,
            "For comparison, the first `olm run` sent {total} writes in the {} s before it was stopped{} (work still \
             going on, which the restarted process may finish).\n",
            crate::e2e::RESTART_WATCH.as_secs(),
            shown
        )?;
    }
    Ok(())
}

/// End-to-end figures where ours is worse than upstream.
pub fn e2e_losses(r: &E2e, losses: &mut Vec<String>) {
    if let (Ok(u), Ok(a)) = (&r.upstream, &r.ours) {
        if a.install > u.install {
            losses.push(format!("end to end: Subscription → CSV Succeeded {} vs upstream {}", ms(a.install), ms(u.install)));
        }
        let total = |s: &Side| s.rss.iter().map(|(_, m)| m).sum::<f64>();
        if total(a) > total(u) {
            losses.push(format!("end to end: RSS after the single install {:.1} MiB vs upstream {:.1} MiB", total(a), total(u)));
        }
    }
    match (&r.upstream_scale, &r.ours_scale) {
        (Some(Ok(u)), Some(Ok(a))) => {
            match (&a.settle, &u.settle) {
                (Settle::Settled(x), Settle::Settled(y)) if x > y => {
                    losses.push(format!("scale run: time to settle {} vs upstream {}", secs(*x), secs(*y)))
                }
                (Settle::NotSettled { .. }, Settle::Settled(y)) => {
                    losses.push(format!("scale run: ours did not settle, upstream did in {}", secs(*y)))
                }
                _ => {}
            }
            if a.per_namespace_kib() > u.per_namespace_kib() {
                losses.push(format!(
                    "scale run: controller memory per namespace {} vs upstream {}",
                    kib(a.per_namespace_kib()),
                    kib(u.per_namespace_kib())
                ));
            }
            if a.controllers_settled() > u.controllers_settled() {
                losses.push(format!(
                    "scale run: controllers' settled RSS {:.1} MiB vs upstream {:.1} MiB",
                    a.controllers_settled(),
                    u.controllers_settled()
                ));
            }
            if a.create > u.create {
                losses.push(format!(
                    "scale run: creating the objects took {} vs {} with upstream running (our controllers' API requests, see the \
                     reconciles table in §3, compete with the creates for the API server on the same cores)",
                    secs(a.create),
                    secs(u.create)
                ));
            }
            let server = |s: &Scale| s.memory.iter().filter(|m| !m.controller).map(|m| m.settled_mib).sum::<f64>();
            if server(a) > server(u) {
                losses.push(format!("scale run: catalog server settled RSS {:.1} MiB vs opm {:.1} MiB", server(a), server(u)));
            }
        }
        (Some(Ok(_)), Some(Err(e))) => losses.push(format!("scale run: ours failed ({}) where upstream ran", clean(e))),
        _ => {}
    }
}

/// Where our single install's milliseconds go: mechanisms read in crates/olm-controllers, located
/// by the timeline above (a statement about the code, not a measurement).
const TIMELINE_CAUSES: &str = "Reading the timeline with crates/olm-controllers: (1) **InstallPlan execution** (InstallPlan \
Installing → CSV created): an approved plan enters Installing and applies its steps in the same pass (installplan/reconcile.rs \
`execute`): the CRD changes are checked first, then the CRDs and the CSV go at once, the CSV already carrying its finalizer, \
API labels and OperatorGroup annotations (metadata.rs `creation_metadata`), then ServiceAccounts, roles and bindings at \
once. A CRD the API server has not Established yet holds back only objects of its own kind; the plan stays Installing until \
the CRDs are Established (InstallPlan Complete), looking again after 20 ms, backing off. (2) **CSV created → Deployment \
created**: the CSV controller's first pass creates the OperatorCondition and finds the requirements not met yet (Pending) \
while the plan writes the RBAC; the pass that sees the bindings and the CRDs Established finds the permissions held by the \
generated Role and binding (no SubjectAccessReview; csv/requirements.rs `granted_by`) and moves Pending → InstallReady → \
Installing in that pass, writing the Deployment. (3) **Deployment Available → CSV Succeeded** is one more CSV pass after the \
Deployment's watch event, a status write; the provided APIs' ClusterRoles are written after it. What is left is the API \
server's (CRDs Established) and kube-controller-manager's (Deployment created → Available).";

/// Why our memory per namespace is what it is: mechanisms read in crates/olm-controllers,
/// located by the inventory and follower tables above.
const SCALE_CAUSES: &str = "Why ours grows per namespace (mechanisms in crates/olm-controllers; the tables above locate them): \
(1) **Watch caches of decoded objects.** `olm run` keeps every object of the kinds it watches decoded into typed structs, \
which take several times their JSON size (compare the follower rows with the JSON column); every follower, whatever its \
controller set, carries the CSV, InstallPlan, OperatorGroup, Namespace, ServiceAccount and ClusterRole caches (manager.rs, \
catalog_operator.rs). What the caches leave out (olm-runtime cache.rs `watch_trimmed`): managedFields and kubectl's \
last-applied copy of every object, the spec and non-OLM annotations of copied CSVs (copies are compared by their \
spec-hash annotation and their status), the icon, description, keywords, maintainers, links, related images, CRD descriptors and \
alm-examples of every other CSV (a copy is written from a fresh read of its original), the schemas of CRDs, the rules \
kube-controller-manager aggregates into OperatorGroup ClusterRoles and the selectors of their aggregation rules (a digest \
instead), all but the name and component labels of what the Operator controller watches for its metadata only, the pod templates of operator Deployments (drift is \
told by the generation at which OLM applied or last checked each one, csv/deployment.rs `VerifiedSpecs`; a Deployment \
changed since is read whole once), the steps and bundle lookups of Complete InstallPlans, \
and the components of every Operator's status (a digest of it instead); one Subscription cache \
serves both controllers that read Subscriptions; CSVs of the same operator share one copy of their install strategy and \
requirement status (olm-runtime cache.rs `Interner`), which are most of what is left of an original CSV. What is left is the decoded form of what reconciles do read. (2) **The \
leader's growth beyond the all-controllers follower** comes from the installing itself: reconciles in flight (at most 16 \
per controller, olm-runtime controller.rs), API connections (over HTTP/1.1 each request in flight has one, with its TLS state \
and read buffer; at most 8 stay idle, olm-runtime client.rs), Events remembered for counting repeats (at most 1024 hashes, \
olm-runtime events.rs), and allocator pages not yet given back (jemalloc purges freed pages after a second, from a background \
thread: .cargo/config.toml; the caches' thread allocates from an arena of its own, so the objects they keep do not hold \
pages of the reconciles' short-lived allocations resident). (3) **What is left** is below the compact JSON of the objects \
each namespace adds (inventory table); going further needs caches that keep a small, purpose-built part of each object \
instead of k8s-openapi's structs (a Deployment is 2.4 KiB before any of its strings). (4) **Reconciles** (table above): a controller whose reconciles per namespace run far above one \
or two is re-reconciling on other objects' changes; that traffic also slows the API server for everyone during the run (a \
namespace event reconciles only the OperatorGroups whose targets it can change).";
