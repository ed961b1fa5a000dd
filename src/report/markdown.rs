//! Markdown from pipeline files and tables, as HTML that cannot run anything: raw HTML in the
//! source is shown as text, and links keep only web, mail and in-page targets.

use pulldown_cmark::{html, CowStr, Event, Options, Parser, Tag};

/// Whether a link target is safe to follow from the report: no `javascript:` or `data:`.
fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    lower.starts_with("https://")
        || lower.starts_with("http://")
        || lower.starts_with("mailto:")
        || lower.starts_with('#')
}

pub(crate) fn to_html(text: &str) -> String {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let events = Parser::new_ext(text, opts).map(|e| match e {
        Event::Html(s) | Event::InlineHtml(s) => Event::Text(s),
        // An image becomes a link to it: the page works offline, and a picture from
        // elsewhere would not load.
        Event::Start(
            Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }
            | Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            },
        ) => Event::Start(Tag::Link {
            link_type,
            dest_url: if safe_url(&dest_url) {
                dest_url
            } else {
                CowStr::from("#")
            },
            title,
            id,
        }),
        Event::End(pulldown_cmark::TagEnd::Image) => Event::End(pulldown_cmark::TagEnd::Link),
        other => other,
    });
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

#[cfg(test)]
mod tests {
    use super::to_html;

    #[test]
    fn markdown_renders_and_raw_html_is_text() {
        let h = to_html("A *b* `c`\n\n<script>alert(1)</script>");
        assert!(
            h.contains("<em>b</em>") && h.contains("<code>c</code>"),
            "{h}"
        );
        assert!(!h.contains("<script>"), "{h}");
        assert!(h.contains("&lt;script&gt;"), "{h}");
    }

    #[test]
    fn unsafe_links_go_nowhere() {
        let h =
            to_html("[x](javascript:alert(1)) [y](https://example.org) ![i](file:///etc/passwd)");
        assert!(!h.contains("javascript:"), "{h}");
        assert!(h.contains("https://example.org"), "{h}");
        assert!(!h.contains("<img") && !h.contains("/etc/passwd"), "{h}");
    }
}
