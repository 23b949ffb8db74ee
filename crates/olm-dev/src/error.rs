//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while building, starting, inspecting or stopping the local
/// control plane. Messages name the command, file or port involved and, for failed commands,
/// carry the tail of the command's log so the user sees the cause without opening files.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    /// Neither the override variable nor `$HOME` tells us where to put files.
    #[error("cannot decide where the {what} directory is: set {variable} or HOME")]
    NoHomeDirectory {
        what: &'static str,
        variable: &'static str,
    },

    /// A port-base variable is not a number in the accepted range.
    #[error("{variable}={value:?} is not a usable port base: use a number from 1024 to 64000 (ports base+247 .. base+581 are used)")]
    BadPortBase { variable: &'static str, value: String },

    /// A filesystem operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A command could not be started at all (binary missing, not executable).
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },

    /// The Go toolchain is not installed where we look for it.
    #[error(
        "`{program}` was not found: install Go 1.26 or newer and put it on PATH, or set OLM_DEV_GO to the go binary (needed for `{command}`)"
    )]
    GoMissing { program: String, command: String },

    /// A build or setup command exited unsuccessfully.
    #[error(
        "step `{step}` failed: `{command}` exited with {status}\nlog: {}\n--- last lines of the log ---\n{tail}",
        log.display()
    )]
    CommandFailed {
        step: String,
        command: String,
        status: String,
        log: PathBuf,
        tail: String,
    },

    /// A built binary does not report the version it was built for.
    #[error("`{command}` printed {output:?}, expected it to contain {expected:?}")]
    WrongVersion {
        command: String,
        expected: String,
        output: String,
    },

    /// Output of a tool (e.g. `go mod download -json`) could not be understood.
    #[error("cannot understand the output of `{command}`: {reason}")]
    UnexpectedOutput { command: String, reason: String },

    /// A loopback port we need is taken by something else.
    #[error(
        "port 127.0.0.1:{port} (needed by {component}) is already in use by another process; \
         stop that process (see `ss -ltnp 'sport = :{port}'`) or run `olm dev down` if it is a leftover of ours"
    )]
    PortInUse { component: &'static str, port: u16 },

    /// A component process exited while we waited for it to become healthy.
    #[error(
        "{component} exited during startup ({status})\ncommand: {command}\nlog: {}\n--- last lines of the log ---\n{tail}",
        log.display()
    )]
    ComponentExited {
        component: &'static str,
        status: String,
        command: String,
        log: PathBuf,
        tail: String,
    },

    /// A component kept running but never passed its health check.
    #[error(
        "{component} did not become healthy within {timeout_secs} s (last check: {last_check})\ncommand: {command}\nlog: {}\n--- last lines of the log ---\n{tail}",
        log.display()
    )]
    ComponentUnhealthy {
        component: &'static str,
        timeout_secs: u64,
        last_check: String,
        command: String,
        log: PathBuf,
        tail: String,
    },

    /// A cluster-level condition (node Ready, default ServiceAccount) was not reached in time.
    #[error("timed out after {timeout_secs} s waiting for {what} (last observation: {last})")]
    Timeout {
        what: String,
        timeout_secs: u64,
        last: String,
    },

    /// Certificate or key generation failed.
    #[error("cannot generate the {what}: {reason}")]
    Pki { what: String, reason: String },

    /// A recorded pid file has content that is not a pid.
    #[error("pid file {} does not contain a process id: {content:?}; delete it", path.display())]
    BadPidFile { path: PathBuf, content: String },

    /// A registry was asked for something it cannot be configured with.
    #[error("cannot set up the registry in {}: {reason}", dir.display())]
    RegistrySetup { dir: PathBuf, reason: String },

    /// Something that only root can do was asked of a non-root user.
    #[error("{what} needs root: run as root (e.g. with sudo)")]
    NeedsRoot { what: String },

    /// A process we started could not be stopped.
    #[error("cannot stop {component} (pid {pid}): {reason}")]
    StopFailed {
        component: &'static str,
        pid: u32,
        reason: String,
    },
}

impl DevError {
    /// A PascalCase category, usable as a metric label or Event reason.
    pub fn category(&self) -> &'static str {
        match self {
            DevError::NoHomeDirectory { .. } => "NoHomeDirectory",
            DevError::BadPortBase { .. } => "BadPortBase",
            DevError::Io { .. } => "IoError",
            DevError::Spawn { .. } => "SpawnFailed",
            DevError::GoMissing { .. } => "GoMissing",
            DevError::CommandFailed { .. } => "CommandFailed",
            DevError::WrongVersion { .. } => "WrongVersion",
            DevError::UnexpectedOutput { .. } => "UnexpectedOutput",
            DevError::PortInUse { .. } => "PortInUse",
            DevError::ComponentExited { .. } => "ComponentExited",
            DevError::ComponentUnhealthy { .. } => "ComponentUnhealthy",
            DevError::Timeout { .. } => "Timeout",
            DevError::Pki { .. } => "CertificateError",
            DevError::BadPidFile { .. } => "BadPidFile",
            DevError::RegistrySetup { .. } => "RegistrySetupFailed",
            DevError::StopFailed { .. } => "StopFailed",
            DevError::NeedsRoot { .. } => "NeedsRoot",
        }
    }

    /// Whether trying the same operation again, unchanged, may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            // Network hiccups during a download, a slow machine, a port freed meanwhile.
            DevError::CommandFailed { .. }
            | DevError::PortInUse { .. }
            | DevError::ComponentUnhealthy { .. }
            | DevError::Timeout { .. }
            | DevError::StopFailed { .. } => true,
            DevError::Io { source, .. } | DevError::Spawn { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
            ),
            DevError::NoHomeDirectory { .. }
            | DevError::BadPortBase { .. }
            | DevError::GoMissing { .. }
            | DevError::WrongVersion { .. }
            | DevError::UnexpectedOutput { .. }
            | DevError::ComponentExited { .. }
            | DevError::Pki { .. }
            | DevError::BadPidFile { .. }
            | DevError::RegistrySetup { .. }
            | DevError::NeedsRoot { .. } => false,
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        DevError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = DevError> = std::result::Result<T, E>;
