//! Hostile requests to the catalog server's gRPC port (issue #20, item 4): garbage and
//! truncated messages, lying length prefixes, wrong content types, unknown methods, invalid
//! UTF-8, broken HTTP/2. Each must get a gRPC error status (or, below gRPC, the connection
//! closed) promptly, and afterwards the server must still answer a valid call, within bounded
//! memory.
//!
//! Requests are built by hand on hyper's HTTP/2 client (or raw TCP), since tonic's client only
//! sends well-formed messages. Its own test binary: the memory check reads this process's
//! peak RSS, which the other suites' servers would disturb.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use olm_registry::{GrpcLimits, RunningServer, ServeConfig};
use olm_registry_api::pb;
use olm_registry_api::pb::registry_client::RegistryClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Longest a hostile call may take to be answered: far below the server's request timeout,
/// so an answer within it is a real answer, not the timeout.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/catalog")
}

async fn start(request_timeout: Duration) -> RunningServer {
    let mut config = ServeConfig::new(vec![("community".into(), fixture())]);
    config.grpc_addrs = vec![("community".into(), "127.0.0.1:0".parse().unwrap())];
    config.reload_interval = None;
    config.grpc_limits = GrpcLimits { request_timeout, ..GrpcLimits::default() };
    olm_registry::start(config).await.expect("server starts")
}

fn addr(server: &RunningServer) -> std::net::SocketAddr {
    server.grpc_addrs["community"]
}

/// One gRPC message: compression flag, big-endian length, bytes.
fn frame(message: &[u8]) -> Bytes {
    framed(0, message.len() as u32, message)
}

/// A frame whose flag and length prefix say whatever the test wants.
fn framed(flag: u8, length: u32, message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(flag);
    out.put_u32(length);
    out.put_slice(message);
    out.freeze()
}

/// What came back: the HTTP status and the gRPC status (from the trailers, or from the
/// headers of a trailers-only answer).
#[derive(Debug)]
struct Answer {
    http: u16,
    grpc_status: Option<i32>,
    message: String,
}

impl Answer {
    fn is_grpc_error(&self) -> bool {
        self.grpc_status.is_some_and(|s| s != 0)
    }
}

fn status_of(headers: &hyper::HeaderMap) -> Option<(i32, String)> {
    let status = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let message = headers.get("grpc-message").and_then(|v| v.to_str().ok()).unwrap_or_default();
    Some((status, percent_decode(message)))
}

/// grpc-message is percent-encoded.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

type Sender = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

/// Starts a call over a fresh HTTP/2 connection; the body is whatever the test pushes into
/// the returned sender (dropping it ends the stream).
async fn open_call(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (Sender, tokio::task::JoinHandle<Answer>) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let (tx, rx) = mpsc::channel(4);
    let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut request = hyper::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request.body(body).expect("request");
    let call = tokio::spawn(async move {
        let response = sender.send_request(request).await.expect("the server answers the request headers");
        let http = response.status().as_u16();
        let header_status = status_of(response.headers());
        let mut trailer_status = None;
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Some(trailers) = frame.trailers_ref() {
                trailer_status = status_of(trailers);
            }
        }
        let (grpc_status, message) = match trailer_status.or(header_status) {
            Some((s, m)) => (Some(s), m),
            None => (None, String::new()),
        };
        Answer { http, grpc_status, message }
    });
    (tx, call)
}

const GRPC: [(&str, &str); 2] = [("content-type", "application/grpc"), ("te", "trailers")];

/// A whole call with `body` sent at once.
async fn call(addr: std::net::SocketAddr, path: &str, headers: &[(&str, &str)], body: Bytes) -> Answer {
    let (tx, answer) = open_call(addr, "POST", path, headers).await;
    let _ = tx.send(Ok(Frame::data(body))).await;
    drop(tx);
    tokio::time::timeout(ANSWER_WITHIN, answer).await.unwrap_or_else(|_| panic!("{path}: no answer within {ANSWER_WITHIN:?}")).expect("call task")
}

/// The server still answers a well-formed call correctly.
async fn still_serves(addr: std::net::SocketAddr) {
    let mut client = RegistryClient::connect(format!("http://{addr}")).await.expect("gRPC connect after hostile input");
    let mut stream = client.list_packages(pb::ListPackageRequest {}).await.expect("ListPackages after hostile input").into_inner();
    let mut names = Vec::new();
    while let Some(p) = stream.message().await.expect("stream item") {
        names.push(p.name);
    }
    assert_eq!(names, ["demo", "etcd"]);
    let pkg = client.get_package(pb::GetPackageRequest { name: "etcd".into() }).await.expect("GetPackage").into_inner();
    assert_eq!(pkg.default_channel_name, "singlenamespace-alpha");
}

const UNARY: &str = "/api.Registry/GetPackage";
const METHODS: [&str; 12] = [
    "/api.Registry/ListPackages",
    "/api.Registry/GetPackage",
    "/api.Registry/GetBundle",
    "/api.Registry/GetBundleForChannel",
    "/api.Registry/GetChannelEntriesThatReplace",
    "/api.Registry/GetBundleThatReplaces",
    "/api.Registry/GetChannelEntriesThatProvide",
    "/api.Registry/GetLatestChannelEntriesThatProvide",
    "/api.Registry/GetDefaultBundleThatProvides",
    "/api.Registry/ListBundles",
    "/api.ExperimentalRegistry/ExperimentalListPackageCustomSchemas",
    "/grpc.health.v1.Health/Check",
];

/// Bytes that are not protobuf: wire type 7 does not exist; a length-delimited field longer
/// than the message; a varint that never ends; an unterminated group.
const NOT_PROTOBUF: [&[u8]; 4] = [
    &[0xff; 16],
    &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, b'x'],
    &[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0x0b, 0x08, 0x01],
];

#[tokio::test]
async fn garbage_messages_get_an_error_status_on_every_method() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    for method in METHODS {
        for garbage in NOT_PROTOBUF {
            let answer = call(addr, method, &GRPC, frame(garbage)).await;
            assert_eq!(answer.http, 200, "{method} {garbage:?}: {answer:?}");
            assert!(answer.is_grpc_error(), "{method} {garbage:?}: {answer:?}");
        }
    }
    still_serves(addr).await;
}

#[tokio::test]
async fn invalid_utf8_in_a_string_field_is_refused() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    // GetPackageRequest{name: "\xff\xfe"}, GetBundleRequest{pkgName: "etcd", channelName: "\xc0"}.
    let bad_name: &[u8] = &[0x0a, 0x02, 0xff, 0xfe];
    let bad_channel: &[u8] = &[0x0a, 0x04, b'e', b't', b'c', b'd', 0x12, 0x01, 0xc0];
    for (method, message) in [(UNARY, bad_name), ("/api.Registry/GetBundle", bad_channel), ("/grpc.health.v1.Health/Check", bad_name)] {
        let answer = call(addr, method, &GRPC, frame(message)).await;
        assert!(answer.is_grpc_error(), "{method}: {answer:?}");
    }
    still_serves(addr).await;
}

#[tokio::test]
async fn truncated_and_missing_messages_get_an_error_status() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    let etcd: &[u8] = &[0x0a, 0x04, b'e', b't', b'c', b'd'];
    let cases: Vec<(&str, Bytes)> = vec![
        ("no message at all", Bytes::new()),
        ("three bytes of the five-byte prefix", Bytes::from_static(&[0, 0, 0])),
        ("prefix says 100 bytes, 6 follow", framed(0, 100, etcd)),
        ("prefix says 1 MiB - 1, 6 follow", framed(0, 1024 * 1024 - 1, etcd)),
        ("a valid message, then half a prefix", [frame(etcd), Bytes::from_static(&[0, 0])].concat().into()),
        ("compressed flag without grpc-encoding", framed(1, etcd.len() as u32, etcd)),
        ("compression flag 7", framed(7, etcd.len() as u32, etcd)),
    ];
    for (what, body) in cases {
        let answer = call(addr, UNARY, &GRPC, body).await;
        assert!(answer.is_grpc_error(), "{what}: {answer:?}");
    }
    // A compression the server does not offer.
    let answer = call(addr, UNARY, &[GRPC[0], GRPC[1], ("grpc-encoding", "snappy")], framed(1, 6, etcd)).await;
    assert_eq!(answer.grpc_status, Some(tonic::Code::Unimplemented as i32), "{answer:?}");
    // Two messages to a unary method: the first is answered or the call refused, never a crash.
    let answer = call(addr, UNARY, &GRPC, [frame(etcd), frame(etcd)].concat().into()).await;
    assert!(answer.grpc_status.is_some(), "{answer:?}");
    still_serves(addr).await;
}

#[tokio::test]
async fn unknown_methods_and_services_are_unimplemented() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    let empty = frame(&[]);
    for path in ["/api.Registry/Nope", "/api.Nope/GetPackage", "/", "/api.Registry/", "/api.Registry/GetPackage/extra", "/%ff%fe/x"] {
        let answer = call(addr, path, &GRPC, empty.clone()).await;
        assert_eq!(answer.grpc_status, Some(tonic::Code::Unimplemented as i32), "{path}: {answer:?}");
    }
    still_serves(addr).await;
}

#[tokio::test]
async fn wrong_content_types_and_methods_do_not_reach_the_service() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    let etcd = frame(&[0x0a, 0x04, b'e', b't', b'c', b'd']);
    for content_type in ["application/json", "text/plain", "application/grpc-web", "application/grpc+json", ""] {
        let headers = [("content-type", content_type), ("te", "trailers")];
        let answer = call(addr, UNARY, &headers, Bytes::from_static(b"{\"name\": \"etcd\"}")).await;
        // Either refused at the HTTP layer (415, as grpc-go does) or as a gRPC error.
        assert!(answer.http == 415 || answer.is_grpc_error() || answer.grpc_status == Some(0), "{content_type:?}: {answer:?}");
    }
    for method in ["GET", "PUT", "DELETE"] {
        let (tx, answer) = open_call(addr, method, UNARY, &GRPC).await;
        let _ = tx.send(Ok(Frame::data(etcd.clone()))).await;
        drop(tx);
        let answer = tokio::time::timeout(ANSWER_WITHIN, answer).await.expect("answered").expect("call task");
        assert!(answer.http >= 400 || answer.grpc_status.is_some(), "{method}: {answer:?}");
    }
    // Nonsense gRPC headers: a timeout that is not one, metadata that is not base64.
    let headers = [GRPC[0], GRPC[1], ("grpc-timeout", "forever"), ("x-bin", "!!not base64!!")];
    let answer = call(addr, UNARY, &headers, etcd.clone()).await;
    assert!(answer.grpc_status.is_some(), "{answer:?}");
    still_serves(addr).await;
}

/// VmHWM (peak resident set) of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn huge_length_prefixes_are_refused_before_reading_the_message() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    let before = peak_rss_kib();
    // 4 GiB - 1 and 1 GiB announced, then 32 MiB of it actually sent: the server answers from
    // the prefix alone, and must not buffer what follows.
    for length in [u32::MAX, 1 << 30, 2 * 1024 * 1024] {
        let (tx, answer) = open_call(addr, "POST", UNARY, &GRPC).await;
        let _ = tx.send(Ok(Frame::data(framed(0, length, &[])))).await;
        let chunk = Bytes::from(vec![0x41u8; 1024 * 1024]);
        let feeder = tokio::spawn(async move {
            for _ in 0..32 {
                if tx.send(Ok(Frame::data(chunk.clone()))).await.is_err() {
                    break;
                }
            }
        });
        let answer = tokio::time::timeout(ANSWER_WITHIN, answer).await.expect("answered").expect("call task");
        feeder.abort();
        assert_eq!(answer.grpc_status, Some(tonic::Code::OutOfRange as i32), "length {length}: {answer:?}");
        assert!(answer.message.contains("message length too large"), "length {length}: {answer:?}");
    }
    still_serves(addr).await;
    let after = peak_rss_kib();
    eprintln!("peak RSS of the test process: {before} KiB before, {after} KiB after");
    let grown_mib = after.saturating_sub(before) / 1024;
    assert!(grown_mib < 256, "peak RSS grew by {grown_mib} MiB while refusing oversized messages");
}

#[tokio::test]
async fn a_stalled_call_ends_at_the_request_timeout() {
    let server = start(Duration::from_secs(2)).await;
    let addr = addr(&server);
    // Half a message and then nothing, the stream left open.
    let (tx, answer) = open_call(addr, "POST", UNARY, &GRPC).await;
    let _ = tx.send(Ok(Frame::data(framed(0, 6, b"\x0a\x04")))).await;
    let answer = tokio::time::timeout(ANSWER_WITHIN, answer).await.expect("answered at the request timeout").expect("call task");
    drop(tx);
    assert_eq!(answer.grpc_status, Some(tonic::Code::Cancelled as i32), "{answer:?}");
    still_serves(addr).await;
}

/// Writes `bytes` on a fresh connection and reads until the server closes it.
async fn raw_connection(addr: std::net::SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let _ = tcp.write_all(bytes).await;
    let mut seen = Vec::new();
    let read = tokio::time::timeout(ANSWER_WITHIN, async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept a connection open after {} hostile bytes", bytes.len());
    seen
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 frame header: 24-bit length, type, flags, stream id.
fn h2_frame(length: u32, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = length.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

#[tokio::test]
async fn broken_http2_closes_the_connection_not_the_server() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    let settings = h2_frame(0, 0x4, 0, 0, &[]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("random bytes", (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()),
        ("HTTP/1.1", b"POST /api.Registry/GetPackage HTTP/1.1\r\nHost: x\r\ncontent-type: application/grpc\r\n\r\n".to_vec()),
        // A frame larger than the 16 KiB the server allows: FRAME_SIZE_ERROR.
        ("oversized frame", [PREFACE, &settings, &h2_frame(16 * 1024 * 1024 - 1, 0x0, 0, 1, &[0; 64])].concat()),
        // HEADERS whose HPACK block indexes past the table.
        ("bad HPACK", [PREFACE, &settings, &h2_frame(4, 0x1, 0x5, 1, &[0xff, 0xff, 0xff, 0x7f])].concat()),
        // DATA on stream 0: PROTOCOL_ERROR.
        ("DATA on stream 0", [PREFACE, &settings, &h2_frame(3, 0x0, 0, 0, b"abc")].concat()),
        // SETTINGS with a length that is not a multiple of 6.
        ("bad SETTINGS", [PREFACE, &h2_frame(5, 0x4, 0, 0, &[0; 5])].concat()),
        // A WINDOW_UPDATE that overflows the connection window: FLOW_CONTROL_ERROR.
        ("window overflow", [PREFACE, &settings, &h2_frame(4, 0x8, 0, 0, &0x7fff_ffffu32.to_be_bytes())].concat()),
    ];
    for (what, bytes) in cases {
        // The server closes the connection (`raw_connection` fails otherwise), and a connection
        // that spoke HTTP/2 is told why: GOAWAY with the error code RFC 9113 gives.
        let answered = raw_connection(addr, &bytes).await;
        let expected = match what {
            "oversized frame" => Some(FRAME_SIZE_ERROR),
            // h2 answers an HPACK index past the table as a malformed HEADERS frame, and a
            // malformed SETTINGS as the connection's first frame as a failed handshake.
            "bad HPACK" | "DATA on stream 0" | "bad SETTINGS" => Some(PROTOCOL_ERROR),
            "window overflow" => Some(FLOW_CONTROL_ERROR),
            _ => None,
        };
        if let Some(code) = expected {
            assert_eq!(goaway_code(&answered), Some(code), "{what}: the server's frames {answered:?}");
        }
    }
    still_serves(addr).await;
}

const PROTOCOL_ERROR: u32 = 0x1;
const FLOW_CONTROL_ERROR: u32 = 0x3;
const FRAME_SIZE_ERROR: u32 = 0x6;

/// The error code of the first GOAWAY frame among the HTTP/2 frames `bytes` holds.
fn goaway_code(mut bytes: &[u8]) -> Option<u32> {
    while bytes.len() >= 9 {
        let length = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let (kind, payload) = (bytes[3], bytes.get(9..9 + length)?);
        if kind == 0x7 && payload.len() >= 8 {
            return Some(u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]));
        }
        bytes = &bytes[9 + length..];
    }
    None
}

#[tokio::test]
async fn many_hostile_calls_at_once_leave_the_server_serving() {
    let server = start(Duration::from_secs(60)).await;
    let addr = addr(&server);
    let calls = futures::stream::iter(0..200u32)
        .map(|i| async move {
            let garbage = NOT_PROTOBUF[i as usize % NOT_PROTOBUF.len()];
            call(addr, METHODS[i as usize % METHODS.len()], &GRPC, frame(garbage)).await
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    assert!(calls.iter().all(Answer::is_grpc_error), "{:?}", calls.iter().find(|a| !a.is_grpc_error()));
    still_serves(addr).await;
}

#[tokio::test]
async fn a_client_that_sends_half_a_preface_and_waits_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut config = ServeConfig::new(vec![("community".into(), fixture())]);
    config.grpc_addrs = vec![("community".into(), "127.0.0.1:0".parse().unwrap())];
    config.reload_interval = None;
    config.grpc_limits = GrpcLimits { first_bytes_timeout: Duration::from_millis(500), ..GrpcLimits::default() };
    let server = olm_registry::start(config).await.expect("server starts");
    let mut tcp = TcpStream::connect(addr(&server)).await.expect("connect");
    tcp.write_all(b"PRI * HTTP/2.0\r\n").await.expect("half a preface");
    // The server closes the connection (EOF or reset) soon after the deadline.
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(ANSWER_WITHIN, async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "a stalled handshake still holds its connection after {ANSWER_WITHIN:?}");
    still_serves(addr(&server)).await;
}
