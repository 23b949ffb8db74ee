//! The programs under test: upstream's `opm` and our Go resolver driver, built from the Go
//! module proxy into the olm-dev cache, and our `olm` binary, built by cargo in release mode.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// operator-registry release whose `cmd/opm` is measured. The proxy refuses `@v/list` here,
/// so `@latest` cannot be asked for: this is the newest tag of the repository when the
/// benchmark was written (override with OLM_BENCH_OPM_VERSION).
pub const DEFAULT_OPM_VERSION: &str = "v1.73.0";

pub struct Tools {
    pub workspace: PathBuf,
    pub olm: PathBuf,
    pub opm: PathBuf,
    pub opm_version: String,
    pub resolver_driver: PathBuf,
    /// operator-lifecycle-manager version the driver is built against (from its go.mod).
    pub olm_upstream_version: String,
    pub go_version: String,
    /// Directory with upstream's `olm`, `catalog` and `cpb` binaries.
    pub upstream_operators: PathBuf,
}

pub fn cache_root() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set; the Go build caches live under ~/.cache/olm-dev")?;
    Ok(PathBuf::from(home).join(".cache/olm-dev"))
}

/// A `go` command sharing olm-dev's module and build caches, never switching toolchains.
pub fn go(cache: &Path) -> Command {
    let mut cmd = Command::new("go");
    cmd.env("GOMODCACHE", cache.join("go/mod"))
        .env("GOCACHE", cache.join("go/build"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod");
    cmd
}

pub fn run(cmd: &mut Command, what: &str) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("{what}: could not start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Build `opm` once per version. operator-registry's go.mod has no replace directives, but
/// `go install pkg@version` asks the proxy for the module's version list (deprecation
/// check), which this proxy refuses; a throwaway consumer module avoids that request.
/// opm needs cgo (sqlite) and, without gpgme headers, the pure-Go OpenPGP build tag.
fn build_opm(cache: &Path, version: &str) -> anyhow::Result<PathBuf> {
    let bin_dir = cache.join(format!("bin/opm-{version}"));
    let bin = bin_dir.join("opm");
    if bin_dir.join(".ok").exists() && bin.exists() {
        return Ok(bin);
    }
    eprintln!("building opm {version} from the Go module proxy (first run only; several minutes)");
    let src = cache.join(format!("src/opm-{version}"));
    std::fs::create_dir_all(&src)?;
    std::fs::create_dir_all(&bin_dir)?;
    if !src.join("go.mod").exists() {
        run(go(cache).current_dir(&src).args(["mod", "init", "local.invalid/opm-bin"]), "go mod init")?;
    }
    run(
        go(cache)
            .current_dir(&src)
            .args(["mod", "edit", &format!("-require=github.com/operator-framework/operator-registry@{version}")]),
        "go mod edit",
    )?;
    run(
        go(cache).current_dir(&src).env("CGO_ENABLED", "1").args([
            "build",
            "-tags",
            "json1,containers_image_openpgp",
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
        ])
        .arg(&bin)
        .arg("github.com/operator-framework/operator-registry/cmd/opm"),
        "building opm",
    )?;
    std::fs::write(bin_dir.join(".ok"), "")?;
    Ok(bin)
}

/// Build our resolver driver (bench/go/resolver-driver) against the OLM version its go.mod
/// requires. `go build` is incremental, so this is quick once the build cache is warm.
fn build_resolver_driver(cache: &Path, workspace: &Path) -> anyhow::Result<(PathBuf, String)> {
    let src = workspace.join("bench/go/resolver-driver");
    let version = olm_upstream_version(workspace)?;
    let bin = cache.join(format!("bin/olm-bench/resolver-driver-{version}"));
    std::fs::create_dir_all(bin.parent().context("driver path has a parent")?)?;
    eprintln!("building the resolver driver against operator-lifecycle-manager {version}");
    run(
        go(cache).current_dir(&src).env("CGO_ENABLED", "0").args(["build", "-trimpath", "-o"]).arg(&bin).arg("."),
        "building bench/go/resolver-driver",
    )?;
    Ok((bin, version))
}

/// The operator-lifecycle-manager version bench/go/resolver-driver/go.mod requires: the one
/// every comparison with upstream uses.
pub(crate) fn olm_upstream_version(workspace: &Path) -> anyhow::Result<String> {
    let go_mod = std::fs::read_to_string(workspace.join("bench/go/resolver-driver/go.mod")).context("reading bench/go/resolver-driver/go.mod")?;
    go_mod
        .lines()
        .find_map(|l| {
            let l = l.trim().trim_start_matches("require").trim();
            l.strip_prefix("github.com/operator-framework/operator-lifecycle-manager ").map(|v| v.trim().to_string())
        })
        .context("bench/go/resolver-driver/go.mod does not require github.com/operator-framework/operator-lifecycle-manager")
}

/// Upstream's own e2e suite (test/e2e of operator-lifecycle-manager `version`) compiled once
/// with `go test -c` through a consumer module (as for opm). Returns the test binary and the
/// suite's directory in the module cache, its working directory (its testdata paths are
/// relative; reading is all it does there).
pub(crate) fn build_upstream_e2e(version: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    const MODULE: &str = "github.com/operator-framework/operator-lifecycle-manager";
    let cache = cache_root()?;
    let bin_dir = cache.join(format!("bin/olm-e2e-{version}"));
    let bin = bin_dir.join("e2e.test");
    let src = cache.join(format!("src/olm-e2e-{version}"));
    std::fs::create_dir_all(&src)?;
    std::fs::create_dir_all(&bin_dir)?;
    if !src.join("go.mod").exists() {
        run(go(&cache).current_dir(&src).args(["mod", "init", "local.invalid/olm-e2e"]), "go mod init")?;
    }
    if !(bin_dir.join(".ok").exists() && bin.exists()) {
        eprintln!("building upstream's e2e suite {version} (go test -c; first run only, 3-6 minutes)");
        run(go(&cache).current_dir(&src).args(["mod", "edit", &format!("-require={MODULE}@{version}")]), "go mod edit")?;
        run(
            go(&cache)
                .current_dir(&src)
                .env("CGO_ENABLED", "0")
                // vet checks upstream's released code: nothing for us to act on, and it costs build time.
                .args(["test", "-c", "-vet=off", "-o"])
                .arg(&bin)
                .arg(format!("{MODULE}/test/e2e")),
            "building upstream's test/e2e",
        )?;
        std::fs::write(bin_dir.join(".ok"), "")?;
    }
    let dir = run(go(&cache).current_dir(&src).args(["list", "-m", "-f", "{{.Dir}}", MODULE]), "go list -m")?;
    let suite = PathBuf::from(dir.trim()).join("test/e2e");
    if !suite.join("testdata").is_dir() {
        bail!("{} has no testdata directory: the module cache does not hold the suite's source", suite.display());
    }
    Ok((bin, suite))
}

/// Build upstream's `olm` and `catalog` operators (cmd/olm, cmd/catalog of the OLM module, the
/// version the resolver driver uses) and `cpb` (util/cpb, the copy tool its bundle unpack Jobs
/// run) once, through a consumer module for the same reason as opm.
fn build_upstream_operators(cache: &Path, version: &str) -> anyhow::Result<PathBuf> {
    let bin_dir = cache.join(format!("bin/olm-{version}"));
    if bin_dir.join(".ok").exists() && ["olm", "catalog", "cpb"].iter().all(|b| bin_dir.join(b).exists()) {
        return Ok(bin_dir);
    }
    eprintln!("building upstream olm and catalog operators {version} (first run only)");
    let src = cache.join(format!("src/olm-{version}"));
    std::fs::create_dir_all(&src)?;
    std::fs::create_dir_all(&bin_dir)?;
    if !src.join("go.mod").exists() {
        run(go(cache).current_dir(&src).args(["mod", "init", "local.invalid/olm-bins"]), "go mod init")?;
    }
    run(
        go(cache)
            .current_dir(&src)
            .args(["mod", "edit", &format!("-require=github.com/operator-framework/operator-lifecycle-manager@{version}")]),
        "go mod edit",
    )?;
    let mut dir_arg = bin_dir.clone().into_os_string();
    dir_arg.push("/");
    run(
        go(cache)
            .current_dir(&src)
            .env("CGO_ENABLED", "0")
            .args(["build", "-trimpath", "-ldflags", "-s -w", "-o"])
            .arg(dir_arg)
            .args([
                "github.com/operator-framework/operator-lifecycle-manager/cmd/olm",
                "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog",
                "github.com/operator-framework/operator-lifecycle-manager/util/cpb",
            ]),
        "building upstream olm and catalog",
    )?;
    std::fs::write(bin_dir.join(".ok"), "")?;
    Ok(bin_dir)
}

/// Our `olm` binary in release mode. bench/run.sh builds it before starting this program;
/// building it from here is not possible under `cargo run`, which holds cargo's build lock
/// for as long as the program runs.
/// A copy of `olm` as DIR/NAME, which the run uses: another cargo build in the same target
/// directory may replace target/release/olm while the benchmark runs.
pub(crate) fn private_copy(olm: &Path, dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let copy = dir.join(name);
    std::fs::copy(olm, &copy).with_context(|| format!("copying {}", olm.display()))?;
    Ok(copy)
}

pub(crate) fn find_olm(workspace: &Path) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("OLM_BENCH_OLM") {
        return Ok(PathBuf::from(path));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from);
    let bin = target.join("release/olm");
    if !bin.exists() {
        bail!("{} is missing: run bench/run.sh (it builds olm and olm-bench in release mode first)", bin.display());
    }
    Ok(bin)
}

pub fn prepare(workspace: &Path) -> anyhow::Result<Tools> {
    let cache = cache_root()?;
    let go_version = run(go(&cache).arg("version"), "go version")?.trim().to_string();
    let opm_version = std::env::var("OLM_BENCH_OPM_VERSION").unwrap_or_else(|_| DEFAULT_OPM_VERSION.to_string());
    let opm = build_opm(&cache, &opm_version)?;
    let (resolver_driver, olm_upstream_version) = build_resolver_driver(&cache, workspace)?;
    let upstream_operators = build_upstream_operators(&cache, &olm_upstream_version)?;
    let olm = find_olm(workspace)?;
    Ok(Tools {
        workspace: workspace.to_path_buf(),
        olm,
        opm,
        opm_version,
        resolver_driver,
        olm_upstream_version,
        go_version,
        upstream_operators,
    })
}
