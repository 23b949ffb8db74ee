//! Who may use the console: the browser that opened the one-time URL. The token in that URL is
//! exchanged once for a session cookie (HttpOnly, SameSite=Strict); every other request needs
//! the cookie, a Host of the console's own address (no DNS rebinding) and, when it carries an
//! Origin, the console's own. The decisions are pure; [`guard`] is the axum middleware.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

/// The cookie that carries the session.
pub const COOKIE: &str = "olm_console";

/// The console's secrets: the one-time token of its URL, and the session it was exchanged for.
pub struct Session {
    /// `127.0.0.1:PORT` and `localhost:PORT`.
    pub hosts: Vec<String>,
    token: Mutex<Option<String>>,
    session: String,
}

/// What to do with a request, by [`Session::decide`].
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Serve,
    /// The one-time token, right: set the cookie and go to the page without the token.
    StartSession,
    Refuse(StatusCode, &'static str),
}

impl Session {
    /// A session for a console listening on `port`, with fresh random secrets.
    pub fn new(port: u16) -> std::io::Result<Session> {
        Ok(Session {
            hosts: vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            token: Mutex::new(Some(random_hex()?)),
            session: random_hex()?,
        })
    }

    /// The URL that opens the console (its token works once).
    pub fn url(&self) -> String {
        let token = self.token.lock().map(|t| t.clone().unwrap_or_default()).unwrap_or_default();
        format!("http://{}/?token={token}", self.hosts[0])
    }

    /// The verdict on a request with these headers and this query's `token`.
    pub fn decide(&self, headers: &HeaderMap, token: Option<&str>) -> Verdict {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        if !self.hosts.iter().any(|h| h == host) {
            return Verdict::Refuse(StatusCode::MISDIRECTED_REQUEST, "this console answers only at the address it printed");
        }
        if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok())
            && !self.hosts.iter().any(|h| origin == format!("http://{h}"))
        {
            return Verdict::Refuse(StatusCode::FORBIDDEN, "a request from another site is refused");
        }
        let cookie_ok = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == COOKIE && constant_time_eq(value, &self.session));
        if cookie_ok {
            return Verdict::Serve;
        }
        if let Some(given) = token {
            let mut expected = self.token.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if expected.as_deref().is_some_and(|t| constant_time_eq(t, given)) {
                // Once: a URL seen by someone else later opens nothing.
                *expected = None;
                return Verdict::StartSession;
            }
        }
        Verdict::Refuse(StatusCode::UNAUTHORIZED, "open the console with the URL `olm console` printed (its token works once); start it again for a new one")
    }

    fn cookie(&self) -> String {
        format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", self.session)
    }
}

/// The middleware: refuses, starts the session, or serves; sets the headers every answer has.
pub async fn guard(State(session): State<Arc<Session>>, request: Request, next: Next) -> Response {
    let token = request
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")))
        .map(str::to_owned);
    let mut response = match session.decide(request.headers(), token.as_deref()) {
        Verdict::Serve => next.run(request).await,
        Verdict::StartSession => {
            let mut response = Redirect::to(request.uri().path()).into_response();
            if let Ok(cookie) = HeaderValue::from_str(&session.cookie()) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            response
        }
        Verdict::Refuse(status, why) => (status, format!("{why}\n")).into_response(),
    };
    let headers = response.headers_mut();
    headers.entry(header::CONTENT_SECURITY_POLICY).or_insert(HeaderValue::from_static(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on a form post.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn random_hex() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn the_token_opens_one_session_once_and_nothing_else_does() {
        let session = Session::new(4000).unwrap();
        let token = session.url().split("token=").nth(1).unwrap().to_owned();
        let host = [(header::HOST, "127.0.0.1:4000")];
        assert!(matches!(session.decide(&headers(&host), None), Verdict::Refuse(StatusCode::UNAUTHORIZED, _)));
        assert!(matches!(session.decide(&headers(&host), Some("wrong")), Verdict::Refuse(StatusCode::UNAUTHORIZED, _)));
        assert_eq!(session.decide(&headers(&host), Some(&token)), Verdict::StartSession);
        assert!(matches!(session.decide(&headers(&host), Some(&token)), Verdict::Refuse(StatusCode::UNAUTHORIZED, _)), "the token works once");
        let cookie = session.cookie();
        let value = cookie.split(';').next().unwrap();
        assert_eq!(session.decide(&headers(&[(header::HOST, "localhost:4000"), (header::COOKIE, value)]), None), Verdict::Serve);
        assert!(matches!(
            session.decide(&headers(&[(header::HOST, "127.0.0.1:4000"), (header::COOKIE, "olm_console=guess")]), None),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
    }

    #[test]
    fn another_host_or_origin_is_refused_even_with_the_cookie() {
        let session = Session::new(4000).unwrap();
        let cookie = session.cookie();
        let value = cookie.split(';').next().unwrap();
        let rebound = headers(&[(header::HOST, "evil.example:4000"), (header::COOKIE, value)]);
        assert!(matches!(session.decide(&rebound, None), Verdict::Refuse(StatusCode::MISDIRECTED_REQUEST, _)));
        let foreign = headers(&[(header::HOST, "127.0.0.1:4000"), (header::COOKIE, value), (header::ORIGIN, "https://evil.example")]);
        assert!(matches!(session.decide(&foreign, None), Verdict::Refuse(StatusCode::FORBIDDEN, _)));
        let own = headers(&[(header::HOST, "127.0.0.1:4000"), (header::COOKIE, value), (header::ORIGIN, "http://127.0.0.1:4000")]);
        assert_eq!(session.decide(&own, None), Verdict::Serve);
    }
}
