//! How the real node's binaries are built (`--real-node`): kubelet and kube-proxy from the same
//! Kubernetes consumer module recipe as the control plane, crictl from cri-tools, and CoreDNS
//! (the node's cluster DNS).

use std::path::PathBuf;
use std::time::Instant;

use super::recipes::{build_kubernetes_commands, go_install};
use super::{Component, check_version};
use crate::error::Result;
use crate::layout::{COREDNS_VERSION, CRICTL_VERSION, KUBERNETES_VERSION, Layout, create_dir_all};
use crate::run::{Progress, format_duration};

/// The node's Kubernetes commands, as Go package paths.
const NODE_COMMANDS: [&str; 2] = [
    "k8s.io/kubernetes/cmd/kubelet",
    "k8s.io/kubernetes/cmd/kube-proxy",
];

/// The module of crictl; its command is `<module>/cmd/crictl`.
const CRICTL_MODULE: &str = "sigs.k8s.io/cri-tools";

pub(super) struct KubernetesNode;

impl Component for KubernetesNode {
    fn dir_name(&self) -> String {
        format!("k8s-node-{KUBERNETES_VERSION}")
    }
    fn title(&self) -> String {
        format!("kubelet and kube-proxy {KUBERNETES_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![layout.kubelet(), layout.kube_proxy()]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        let expected = format!("Kubernetes {KUBERNETES_VERSION}");
        let lines = [
            check_version(&layout.kubelet(), &["--version"], &expected)?,
            check_version(&layout.kube_proxy(), &["--version"], &expected)?,
        ];
        Ok(lines.join("\n"))
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        build_kubernetes_commands(
            layout,
            progress,
            &self.dir_name(),
            &NODE_COMMANDS,
            &layout.k8s_node_bin_dir(),
            "kubelet, kube-proxy (cold: 4-5 min on 2 cores; seconds when the control plane's build cache is warm)",
        )
    }
}

pub(super) struct Crictl;

impl Component for Crictl {
    fn dir_name(&self) -> String {
        format!("crictl-{CRICTL_VERSION}")
    }
    fn title(&self) -> String {
        format!("crictl {CRICTL_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![layout.crictl()]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        check_version(&layout.crictl(), &["--version"], CRICTL_VERSION)
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        let log = layout.build_log(&self.dir_name());
        let bin = layout.crictl();
        let bin = bin.parent().unwrap_or(&layout.cache_dir).to_path_buf();
        create_dir_all(&bin)?;
        let step = Instant::now();
        progress.say(format!(
            "  [1/1] go install {CRICTL_MODULE}/cmd/crictl@{CRICTL_VERSION} (cold: about 1 min)"
        ));
        // cri-tools' go.mod has no replace directives, so `go install pkg@version` works; the
        // version is stamped as its Makefile does (without it `--version` says `unknown`).
        let ldflags = format!("-s -w -X {CRICTL_MODULE}/pkg/version.Version={CRICTL_VERSION}");
        let package = format!("{CRICTL_MODULE}/cmd/crictl@{CRICTL_VERSION}");
        go_install(layout, progress, &log, &bin, &ldflags, &package)?;
        progress.say(format!(
            "  [1/1] done in {}",
            format_duration(step.elapsed())
        ));
        Ok(())
    }
}

/// CoreDNS's module; its main package is the module root.
const COREDNS_MODULE: &str = "github.com/coredns/coredns";

pub(super) struct CoreDns;

impl Component for CoreDns {
    fn dir_name(&self) -> String {
        format!("coredns-{COREDNS_VERSION}")
    }
    fn title(&self) -> String {
        format!("CoreDNS {COREDNS_VERSION}")
    }
    fn outputs(&self, layout: &Layout) -> Vec<PathBuf> {
        vec![layout.coredns()]
    }
    fn verify(&self, layout: &Layout) -> Result<String> {
        check_version(&layout.coredns(), &["-version"], COREDNS_VERSION.trim_start_matches('v'))
    }
    fn build(&self, layout: &Layout, progress: &Progress) -> Result<()> {
        let log = layout.build_log(&self.dir_name());
        let bin = layout.coredns();
        let bin = bin.parent().unwrap_or(&layout.cache_dir).to_path_buf();
        create_dir_all(&bin)?;
        let step = Instant::now();
        progress.say(format!("  [1/1] go install {COREDNS_MODULE}@{COREDNS_VERSION} (cold: about 3 min)"));
        let package = format!("{COREDNS_MODULE}@{COREDNS_VERSION}");
        go_install(layout, progress, &log, &bin, "-s -w", &package)?;
        progress.say(format!("  [1/1] done in {}", format_duration(step.elapsed())));
        Ok(())
    }
}
