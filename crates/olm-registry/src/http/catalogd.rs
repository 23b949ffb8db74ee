//! catalogd's API over our snapshots: `/catalogs/{name}/api/v1/all` (the whole catalog as
//! JSON lines) and `/catalogs/{name}/api/v1/metas` (filtered by schema, package and name),
//! streamed in chunks.

use super::*;

/// catalogd accepts only DNS-1123 subdomain catalog names.
pub(super) fn dns1123_subdomain_error(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 253 {
        return Some("must be 1 to 253 characters".into());
    }
    for label in name.split('.') {
        let bytes = label.as_bytes();
        let ok = !bytes.is_empty()
            && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric();
        if !ok {
            return Some("must consist of lower case alphanumeric characters, '-' or '.', and start and end with an alphanumeric character".into());
        }
    }
    None
}

fn catalogd_catalog(state: &AppState, name: &str) -> Result<Arc<CatalogSnapshot>, ApiError> {
    if let Some(why) = dns1123_subdomain_error(name) {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, format!("invalid catalog name {}: {why}", quoted(name))).with("catalog", name));
    }
    served(state, name).map(|(_, s)| s)
}

pub(super) async fn catalogd_all(State(state): State<AppState>, Path(name): Path<String>, headers: HeaderMap, uri: Uri) -> Response {
    let snapshot = match catalogd_catalog(&state, &name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let count = snapshot.catalog.all_metas().len();
    let len = snapshot.all_len;
    jsonl_response(&headers, &uri, snapshot, MetaSelection::All { count }, len)
}

#[derive(Debug, Default)]
struct MetasQuery {
    schema: Option<String>,
    package: Option<String>,
    name: Option<String>,
}

fn parse_metas_query(raw: &HashMap<String, String>) -> Result<MetasQuery, ApiError> {
    let mut q = MetasQuery::default();
    for (key, value) in raw {
        let value = (!value.is_empty()).then(|| value.clone());
        match key.as_str() {
            "schema" => q.schema = value,
            "package" => q.package = value,
            "name" => q.name = value,
            other => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("unknown query parameter {}; the metas endpoint accepts only schema, package and name", quoted(other)),
                )
                .with("parameter", other))
            }
        }
    }
    Ok(q)
}

pub(super) async fn catalogd_metas(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(raw): Query<HashMap<String, String>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let snapshot = match catalogd_catalog(&state, &name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let query = match parse_metas_query(&raw) {
        Ok(q) => q,
        Err(e) => return e.into_response(),
    };
    // Exact-match filters, empty = any (catalogd); blobs are referenced by position so
    // the body streams them from the snapshot without copying the catalog.
    let mut indices = Vec::new();
    let mut len = 0u64;
    for (i, meta) in snapshot.catalog.all_metas().iter().enumerate() {
        let matches = query.schema.as_deref().is_none_or(|s| meta.schema == s)
            && query.package.as_deref().is_none_or(|p| meta.package == p)
            && query.name.as_deref().is_none_or(|n| meta.name == n);
        if matches {
            indices.push(i as u32);
            len += meta.blob.len() as u64;
        }
    }
    jsonl_response(&headers, &uri, snapshot.clone(), MetaSelection::Some(indices), len)
}

/// Which blobs a JSON-lines body carries.
enum MetaSelection {
    All { count: usize },
    Some(Vec<u32>),
}

fn jsonl_response(headers: &HeaderMap, uri: &Uri, snapshot: Arc<CatalogSnapshot>, selection: MetaSelection, len: u64) -> Response {
    let etag = snapshot_etag(&snapshot, uri);
    let loaded_at = snapshot.loaded_at;
    if none_match(headers, &etag) || not_modified_since(headers, loaded_at) {
        return not_modified(&etag, Some(loaded_at));
    }
    let indices = match selection {
        MetaSelection::All { count } => (0..count as u32).collect(),
        MetaSelection::Some(v) => v,
    };
    let body = JsonLinesBody { snapshot, indices, next: 0, remaining: len };
    let mut resp = Response::new(Body::new(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/jsonl"));
    insert_header(&mut resp, header::ETAG, &etag);
    insert_header(&mut resp, header::LAST_MODIFIED, &httpdate::fmt_http_date(loaded_at));
    resp
}

/// Streams canonical blobs of a snapshot in chunks of about 64 KiB; its exact size is
/// known up front, so clients get a Content-Length.
struct JsonLinesBody {
    snapshot: Arc<CatalogSnapshot>,
    indices: Vec<u32>,
    next: usize,
    remaining: u64,
}

const CHUNK_BYTES: usize = 64 * 1024;

impl http_body::Body for JsonLinesBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.next >= this.indices.len() {
            return Poll::Ready(None);
        }
        let metas = this.snapshot.catalog.all_metas();
        let mut chunk = BytesMut::with_capacity(CHUNK_BYTES);
        while this.next < this.indices.len() && (chunk.is_empty() || chunk.len() < CHUNK_BYTES) {
            if let Some(meta) = metas.get(this.indices[this.next] as usize) {
                chunk.extend_from_slice(meta.blob.text().as_bytes());
            }
            this.next += 1;
        }
        this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
        Poll::Ready(Some(Ok(http_body::Frame::data(chunk.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.next >= self.indices.len()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_names_follow_dns1123_subdomain() {
        assert!(dns1123_subdomain_error("community").is_none());
        assert!(dns1123_subdomain_error("a.b-c").is_none());
        assert!(dns1123_subdomain_error("Bad").is_some());
        assert!(dns1123_subdomain_error("-x").is_some());
        assert!(dns1123_subdomain_error("").is_some());
    }
}
