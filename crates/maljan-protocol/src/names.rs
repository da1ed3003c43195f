//! Names the conventions fix: the manifest tool, the put_sample tools (which a runtime hides from
//! users and models), and the reduction of a sample's filename that both sides apply.

/// The manifest tool every maljan server answers.
pub const CAPABILITIES_TOOL: &str = "capabilities";

pub const PUT_SAMPLE: &str = "put_sample";
pub const PUT_SAMPLE_BEGIN: &str = "put_sample_begin";
pub const PUT_SAMPLE_CHUNK: &str = "put_sample_chunk";
pub const PUT_SAMPLE_FINISH: &str = "put_sample_finish";

/// The tools a server receives samples through.
pub const STAGING_TOOLS: &[&str] = &[
    PUT_SAMPLE,
    PUT_SAMPLE_BEGIN,
    PUT_SAMPLE_CHUNK,
    PUT_SAMPLE_FINISH,
];

pub fn is_staging_tool(name: &str) -> bool {
    STAGING_TOOLS.contains(&name)
}

/// Reduces a client's filename to a safe base name: no directories, no `..`, no control or
/// reserved characters, nothing hidden, at most 200 characters, never empty. The server stores a
/// sample under this name; the client applies it too, so hostile bytes stay off the wire and out
/// of a mirror directory.
pub fn sanitize_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').to_string();
    let cleaned: String = cleaned.chars().take(200).collect();
    if cleaned.is_empty() {
        "sample".to_string()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_reduced_to_a_safe_base_name() {
        assert_eq!(sanitize_filename("../../etc/passwd"), "passwd");
        assert_eq!(sanitize_filename("a\x07b\nc.exe"), "a_b_c.exe");
        assert_eq!(sanitize_filename(".."), "sample");
        assert_eq!(sanitize_filename(""), "sample");
        assert_eq!(sanitize_filename("..\\..\\x.dll"), "x.dll");
        assert_eq!(sanitize_filename(".hidden"), "hidden");
        assert_eq!(sanitize_filename("a:b?.txt"), "a_b_.txt");
        assert_eq!(sanitize_filename(&"é".repeat(300)).chars().count(), 200);
        assert_eq!(sanitize_filename("report.pdf"), "report.pdf");
    }

    #[test]
    fn the_staging_tools_are_known_by_name() {
        assert!(STAGING_TOOLS.iter().all(|t| is_staging_tool(t)));
        assert!(!is_staging_tool(CAPABILITIES_TOOL));
        assert!(!is_staging_tool("put_sample_x"));
    }

    proptest! {
        #[test]
        fn sanitized_names_never_escape(name in ".{0,80}") {
            let safe = sanitize_filename(&name);
            prop_assert!(!safe.is_empty());
            prop_assert!(!safe.contains('/') && !safe.contains('\\'));
            prop_assert!(!safe.starts_with('.'));
            prop_assert!(!safe.chars().any(char::is_control));
            prop_assert!(std::path::Path::new(&safe).components().count() == 1);
        }
    }
}
