//! A real browser for the console's suites: headless Chromium from Debian's packages driven
//! through WebDriver (chromedriver), `olm console` started with a kubeconfig, and plain HTTP
//! to it.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use serde_json::json;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Kills the child when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn browser_available() -> bool {
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        return true;
    }
    if !crate::dev_env::running_as_root() {
        return false;
    }
    let apt = Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "--no-install-recommends", "chromium", "chromium-driver"])
        .output()
        .expect("apt-get runs");
    assert!(apt.status.success(), "apt-get install chromium chromium-driver: {}", String::from_utf8_lossy(&apt.stderr));
    true
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A raw HTTP/1.1 GET with `headers`; the status code and the body.
pub fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let (code, _, body) = get_with_head(port, path, headers);
    (code, body)
}

/// [`get`], with the response's status line and headers.
pub fn get_with_head(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to the console");
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let code = response.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response.as_str(), ""));
    (code, head.to_owned(), body.to_owned())
}

pub async fn browser(driver_port: u16) -> Client {
    let capabilities = json!({"goog:chromeOptions": {"binary": CHROMIUM, "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,800"]}});
    let capabilities = capabilities.as_object().cloned().expect("an object");
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector).capabilities(capabilities).connect(&format!("http://127.0.0.1:{driver_port}")).await.expect("chromedriver answers")
}

/// `olm console` with `kubeconfig` (and `args`); its URL and the process.
pub fn start_console(kubeconfig: &Path, args: &[&str]) -> (String, Running) {
    let mut console = Command::new(crate::olm_bin())
        .args(["console", "--port", "0"])
        .args(args)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("olm console starts");
    let mut first_line = String::new();
    BufReader::new(console.stdout.take().expect("stdout")).read_line(&mut first_line).expect("olm console prints its URL");
    let url = first_line.split_whitespace().find(|w| w.starts_with("http://127.0.0.1:")).unwrap_or_else(|| panic!("a URL in {first_line:?}")).to_owned();
    (url, Running(console))
}


/// chromedriver on a free port, ready; the port and the process.
pub fn chromedriver() -> (u16, Running) {
    let port = free_port();
    let driver = Running(Command::new(CHROMEDRIVER).arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("chromedriver starts"));
    crate::dev_env::wait_for("chromedriver", Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", port)).map(drop).map_err(|e| e.to_string()));
    (port, driver)
}
