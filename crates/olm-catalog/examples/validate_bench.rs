//! Time `olm_catalog::validate` (what `olm catalog validate` runs) on any source:
//! `cargo run --release -p olm-catalog --example validate_bench DIR...`

use std::time::Instant;

fn main() {
    for dir in std::env::args().skip(1) {
        let t0 = Instant::now();
        match olm_catalog::validate(std::path::Path::new(&dir)) {
            Ok(r) => println!(
                "{dir}: {} ({} packages, {} channels, {} bundles, {} problems) in {:.0} ms",
                r.format.as_str(),
                r.packages,
                r.channels,
                r.bundles,
                r.problems.len(),
                t0.elapsed().as_secs_f64() * 1000.0
            ),
            Err(e) => println!("{dir}: error: {e}"),
        }
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(hwm) = status.lines().find(|l| l.starts_with("VmHWM:")) {
        println!("peak RSS {}", hwm.trim_start_matches("VmHWM:").trim());
    }
}
