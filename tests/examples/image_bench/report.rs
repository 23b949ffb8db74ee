//! The benchmark's findings as the Markdown of BENCHMARKS.md §4 (`--markdown FILE`, which
//! `bench/run.sh` asks for): each table is printed as it is made and kept for the file.

use std::fmt::Write as _;

/// Lines printed as they come and kept, by part.
#[derive(Default)]
pub struct Report {
    install: String,
    catalog: String,
}

/// Which part a line belongs to.
#[derive(Clone, Copy)]
pub enum Part {
    Install,
    Catalog,
}

impl Report {
    /// Print `line` and keep it for the Markdown.
    pub fn line(&mut self, part: Part, line: impl AsRef<str>) {
        let line = line.as_ref();
        println!("{line}");
        let out = match part {
            Part::Install => &mut self.install,
            Part::Catalog => &mut self.catalog,
        };
        let _ = writeln!(out, "{line}");
    }

    /// The section's body: how each part measures, then what it measured.
    pub fn markdown(&self, rounds: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Set-up: the e2e suites' control plane (kube-apiserver, kube-controller-manager, kwok node), every controller in the benchmark's process (`tests/examples/image_bench`), a CNCF distribution registry on loopback (plain HTTP), images pushed with `olm bundle push` / `olm catalog push`. The controllers' image cache is a directory of the run. Upstream is not run in this part: its bundle unpack Job needs a node that runs containers; the side-by-side figure is the real-node comparison below. {rounds} rounds per measurement; p90 is the nearest rank.\n");
        if !self.install.is_empty() {
            let _ = writeln!(out, "### Subscription → CSV Succeeded from images\n\n{INSTALL_METHOD}\n\n{}", self.install);
        }
        if !self.catalog.is_empty() {
            let _ = writeln!(out, "### Catalog image ready: the real catalog\n\n{CATALOG_METHOD}\n\n{}", self.catalog);
        }
        out
    }
}

const INSTALL_METHOD: &str = "etcd 0.9.4 (crates/olm-registry/testdata/bundles/etcd/0.9.4, channel singlenamespace-alpha), an own-namespace OperatorGroup, each round in a fresh namespace with its own CatalogSource `spec.image` (READY before the Subscription is created, not timed); the namespace is deleted and gone before the next round, and rounds go inline, cold, warm in turn. Time = Subscription create request → the CSV's Succeeded event on a watch started beforehand; the step columns are when each object was first seen (medians, ms after the create).

- **inline**: the catalog image carries the manifests (`olm catalog render BUNDLE --image REF`, `olm.bundle.object`); nothing else is pulled (checked: the bundle image is not in the cache after the round).
- **image-only, cold**: the catalog names the bundle by digest with only `olm.csv.metadata` (`--migrate-level bundle-object-to-csv-metadata`); right before the Subscription is created every blob and image record is deleted from the controllers' image cache, so the bundle's manifest, config and layer are fetched from the registry (checked: absent before, present after).
- **image-only, warm**: the same catalog, the bundle image already cached (checked): no network; the layer is still unpacked and rendered on every install.

The bundle is read before the InstallPlan is created, so pulling it shows in the first step column. These times are on the shared e2e control plane with in-process controllers, so they are not comparable with §3's single install (a private control plane, `olm run` as a process, a gRPC catalog address).";

const CATALOG_METHOD: &str = "The real catalog pushed with `olm catalog push`. Per round: a CatalogSource with `spec.image` naming the tag, created in a fresh namespace right after every blob and record was deleted from the controllers' image cache (checked: the catalog image is cached after READY): creation → `status.connectionState.lastObservedState` READY on a watch. Then the same work with the library alone, with a fresh cache directory each round. The registry is on loopback, so the pull is what a registry next to the cluster costs, not one across the internet.";
