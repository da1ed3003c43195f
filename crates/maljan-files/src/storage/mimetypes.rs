//! The content type automation-file reports for a local file: Python's
//! `mimetypes.guess_type("_" + suffixes)`, strict tables, with the system's mime.types files read
//! over the built-in table as Python's `mimetypes.init()` reads them.

use std::{collections::HashMap, sync::OnceLock};

#[path = "mimetypes_table.rs"]
mod table;

/// The files Python's `mimetypes.knownfiles` names, read in order (later ones win).
const KNOWN_FILES: &[&str] = &[
    "/etc/mime.types",
    "/etc/httpd/mime.types",
    "/etc/httpd/conf/mime.types",
    "/etc/apache/mime.types",
    "/etc/apache2/mime.types",
    "/usr/local/etc/httpd/conf/mime.types",
    "/usr/local/lib/netscape/mime.types",
    "/usr/local/etc/mime.types",
];

fn types() -> &'static HashMap<String, String> {
    static TYPES: OnceLock<HashMap<String, String>> = OnceLock::new();
    TYPES.get_or_init(|| {
        let mut map: HashMap<String, String> = table::TYPES
            .iter()
            .map(|(ext, ty)| (ext.to_string(), ty.to_string()))
            .collect();
        for file in KNOWN_FILES {
            if let Ok(text) = std::fs::read_to_string(file) {
                read_mime_types(&text, &mut map);
            }
        }
        map
    })
}

/// One mime.types file: `type ext ext…` per line, `#` starts a comment.
fn read_mime_types(text: &str, map: &mut HashMap<String, String>) {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        let Some(ty) = words.next() else { continue };
        for ext in words {
            map.insert(format!(".{ext}"), ty.to_string());
        }
    }
}

/// `os.path.splitext` of a name without directories: the last `.ext`, unless the dot leads.
fn splitext(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) if name[..i].chars().any(|c| c != '.') => (&name[..i], &name[i..]),
        _ => (name, ""),
    }
}

/// Python's `PurePosixPath(name).suffixes`, joined.
fn suffixes(name: &str) -> &str {
    let base = name.rsplit('/').next().unwrap_or(name);
    if base.ends_with('.') {
        return "";
    }
    let trimmed = base.trim_start_matches('.');
    match trimmed.find('.') {
        Some(i) => &trimmed[i..],
        None => "",
    }
}

/// The content type Python guesses for `name` from its suffixes, if any.
pub(crate) fn guess(name: &str) -> Option<String> {
    let mut url = format!("_{}", suffixes(name));
    let (mut base, mut ext) = {
        let (b, e) = splitext(&url);
        (b.to_string(), e.to_string())
    };
    while let Some((_, alias)) = table::SUFFIXES.iter().find(|(s, _)| *s == ext) {
        url = format!("{base}{alias}");
        let (b, e) = splitext(&url);
        (base, ext) = (b.to_string(), e.to_string());
    }
    if table::ENCODINGS.iter().any(|(s, _)| *s == ext) {
        let (_, e) = splitext(&base);
        ext = e.to_string();
    }
    let types = types();
    types
        .get(&ext)
        .or_else(|| types.get(&ext.to_lowercase()))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::guess;

    #[test]
    fn guesses_follow_pythons_tables() {
        assert_eq!(guess("a.txt").as_deref(), Some("text/plain"));
        assert_eq!(guess("dir.d/A.TXT").as_deref(), Some("text/plain"));
        assert_eq!(guess("x.json").as_deref(), Some("application/json"));
        assert_eq!(guess("b.tar.gz").as_deref(), Some("application/x-tar"));
        assert_eq!(guess("b.tgz").as_deref(), Some("application/x-tar"));
        assert_eq!(guess("c.gz"), None);
        assert_eq!(guess("noext"), None);
        assert_eq!(guess(".bashrc"), None);
    }
}
