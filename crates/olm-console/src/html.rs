//! HTML made safe: every text from the cluster or a catalog is escaped; a catalog's Markdown is
//! rendered with its raw HTML shown as text and its links kept only when they are http(s) or
//! mailto; the page frame every page shares. Pure.

use std::fmt::Write as _;

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

/// `text` escaped for an HTML text node or a quoted attribute value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// `text` as a URL query value.
pub fn query_value(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// Whether a catalog's link may be followed: http(s) and mailto only (never `javascript:`,
/// `data:` or a relative link into the console).
pub fn safe_link(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("mailto:")
}

/// A catalog's Markdown as HTML: raw HTML (blocks and inline) shown as text, images dropped
/// to their alt text (the page loads nothing from elsewhere), links kept only when
/// [`safe_link`] (else their text alone), every link opening without a referrer.
pub fn markdown(source: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let mut dropped_links = 0usize;
    let events = Parser::new_ext(source, options).filter_map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        // The image's alt text stays, as text.
        Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => None,
        Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
            if safe_link(&dest_url) || link_type == LinkType::Email {
                Some(Event::Start(Tag::Link { link_type, dest_url, title, id }))
            } else {
                dropped_links += 1;
                None
            }
        }
        Event::End(TagEnd::Link) if dropped_links > 0 => {
            dropped_links -= 1;
            None
        }
        other => Some(other),
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    // Links leave without telling the catalog's site where from, and in a new tab.
    html.replace("<a href=", "<a rel=\"noopener noreferrer nofollow\" target=\"_blank\" href=")
}

/// A whole page: the navigation, `title`, and `body` (already HTML). Styles and the one script
/// come from /assets (the Content-Security-Policy allows nothing inline).
pub fn page(title: &str, body: &str) -> String {
    live_page(title, body, None)
}

/// [`page`], following the cluster: the script reloads it when the event stream at `live` (a
/// path under /events/) says that what it shows changed.
pub fn live_page(title: &str, body: &str, live: Option<&str>) -> String {
    let live = live.map(|l| format!(" data-live=\"{}\"", escape(l))).unwrap_or_default();
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · OLM console</title>
<link rel="stylesheet" href="/assets/style.css">
<script src="/assets/app.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header><nav aria-label="Main"><a class="brand" href="/">OLM console</a> <a href="/">Catalog</a> <a href="/installed">Installed</a></nav></header>
<main id="main"{live}>
<h1>{title}</h1>
{body}
</main>
</body>
</html>
"##,
        title = escape(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_cannot_become_markup() {
        assert_eq!(escape(r#"<img src=x onerror="a()">&'"#), "&lt;img src=x onerror=&quot;a()&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn markdown_shows_raw_html_as_text_and_drops_unsafe_links() {
        let html = markdown("# Hi\n\n<script>window.pwned=1</script>\n\nA <b onclick=\"x()\">bold</b> [click](javascript:window.pwned=2) and [docs](https://example.com/a) ![i](https://evil.example/t.png)");
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("&lt;script&gt;window.pwned=1&lt;/script&gt;"), "{html}");
        assert!(!html.contains("<b "), "{html}");
        assert!(!html.to_ascii_lowercase().contains("javascript:window"), "the unsafe link is gone, its text stays: {html}");
        assert!(html.contains(">click<") || html.contains("click"), "{html}");
        assert!(html.contains(r#"<a rel="noopener noreferrer nofollow" target="_blank" href="https://example.com/a">docs</a>"#), "{html}");
        assert!(!html.contains("<img"), "images load nothing: {html}");
        assert!(html.contains("<h1>Hi</h1>"), "{html}");
    }

    #[test]
    fn only_web_and_mail_links_are_safe() {
        for safe in ["https://a", "HTTP://a", "mailto:x@y"] {
            assert!(safe_link(safe), "{safe}");
        }
        for bad in ["javascript:alert(1)", " JavaScript:x", "data:text/html,x", "/installed", "vbscript:x"] {
            assert!(!safe_link(bad), "{bad}");
        }
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(query_value("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
