//! Error-path benchmark for YAML catalog files:
//! `cargo run --release -p olm-catalog --example yaml_error_bench [MB...]`.
//!
//! For each size, builds a YAML stream of that many megabytes (FBC bundle documents) in a
//! temporary directory, once valid and once with one unterminated single-quoted scalar in
//! the third document, and prints how long loading each takes and the error reported.
//! The error path should cost about what the valid parse costs (linear), not more.

use std::time::Instant;

/// A `---` stream of bundle documents, or (`list`) one document holding a long list of
/// them; with `broken`, the third name opens a single quote that nothing closes.
fn stream(megabytes: usize, broken: bool, list: bool) -> String {
    let mut text = String::from(if list { "schema: olm.list\nitems:\n" } else { "" });
    let mut i = 0;
    while text.len() < megabytes * 1024 * 1024 {
        let name = if broken && i == 2 { format!("'p.v{i}") } else { format!("p.v{i}") };
        let document = format!(
            "---\nschema: olm.bundle\npackage: p\nname: {name}\nimage: quay.io/x/p:{i}\nproperties:\n- type: olm.package\n  value:\n    packageName: p\n    version: 1.0.{i}\n- type: olm.csv.metadata\n  value:\n    description: \"An operator: it manages things, and says so at some length to fill the file.\"\n"
        );
        if list {
            // `- ` before the first line, two spaces before the others.
            let body = document.trim_start_matches("---\n").trim_end_matches('\n');
            text.push_str(&format!("- {}\n", body.replace('\n', "\n  ")));
        } else {
            text.push_str(&document);
        }
        i += 1;
    }
    text
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![1, 5, 10] } else { sizes };
    let dir = tempfile::tempdir().expect("temporary directory");
    println!("{:>4} {:>9} {:>10} {:>10}  error", "MB", "shape", "valid ms", "broken ms");
    for (mb, list) in sizes.iter().flat_map(|&mb| [(mb, false), (mb, true)]) {
        let mut times = Vec::new();
        let mut message = String::new();
        for broken in [false, true] {
            let sub = dir.path().join(format!("{mb}-{list}-{broken}"));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join("catalog.yaml"), stream(mb, broken, list)).unwrap();
            let start = Instant::now();
            let (_, problems) = olm_catalog::load::load_fbc(&sub).expect("directory loads");
            times.push(start.elapsed().as_millis());
            if broken {
                message = problems.first().map(ToString::to_string).unwrap_or_else(|| "(no error!)".into());
            }
        }
        let message: String = message.chars().take(200).collect();
        let shape = if list { "list" } else { "documents" };
        println!("{mb:>4} {shape:>9} {:>10} {:>10}  {message}", times[0], times[1]);
    }
}
