//! maljan-analysis: the `analysis` tool server's tools — static analysis of one sample file.
//!
//! It owns identification by content (its own detector, not libmagic: see [`identify`] for why),
//! packer / installer / compiler detection ([`toolchain`]), capabilities with ATT&CK ids
//! ([`capabilities`]), a built-in YARA rule set (`rules/`), hashes, strings, indicators of compromise, entropy, the
//! PE / ELF / Mach-O / archive / document parsers, payload carving, member extraction for
//! recursive analysis ([`members`]), byte and text search, YARA
//! scanning (yara-x, behind the `yara` feature), unpacking ([`unpack`]: UPX through the host's
//! `upx`) and the optional external analysers (capa, FLOSS),
//! with the tool and argument names of Maljan's Python analysis server
//! (`reference/maljan-analysis-server.md`). Each concern is a module with a pure function the triage
//! job and the benches can call directly, plus the typed tool that wraps it.
//!
//! It builds on `maljan-server` (registry, errors, roots, manifest) and must not depend on the client
//! runtime, on rmcp or on any transport: serving is the framework's job. Parsers never panic the
//! server: hostile input comes back as an error or a partial answer (see the proptests). Every
//! count a parser takes from the file is charged to a [`budget::Budget`] sized by the file's real
//! length, which also carries the call's cancellation: a file that claims more than it holds gets
//! `tool_failed` naming the limit, and a cancelled or timed-out call stops working.

pub mod archive;
pub mod authenticode;
pub mod budget;
pub mod capabilities;
mod capabilities_code;
pub mod carve;
pub mod common;
pub mod document;
pub mod document_lnk;
pub mod elf;
pub mod entropy;
pub mod external;
pub mod hashes;
pub mod identify;
mod identify_formats;
mod identify_media;
mod identify_scripts;
mod identify_text;
pub mod ioc_judge;
mod ioc_places;
pub mod iocs;
pub mod macho;
mod macho_commands;
mod macho_parts;
pub mod members;
pub mod members_chm;
mod members_formats;
mod members_html;
pub mod members_iso;
pub mod members_mail;
mod members_rar;
pub mod members_tnef;
mod members_zip;
pub mod ole;
mod pdf;
pub mod pe;
mod pe_exports;
mod pe_imports;
mod pe_lenient;
mod pe_map;
mod pe_parts;
pub mod search;
pub mod strings;
pub mod toolchain;
pub mod unpack;
pub mod work;
pub mod yara;

use std::{path::PathBuf, sync::Arc};

use maljan_server::{Registry, Roots};

pub use entropy::shannon;
pub use hashes::{Hashes, hash_bytes};
pub use identify::{FileKind, identify};
pub use identify_text::script_language;
pub use work::WorkDir;

/// What the analysis server needs to know about its host.
#[derive(Debug, Clone)]
pub struct AnalysisConfig {
    /// The directories sample paths must lie in (the staging root and any sample roots).
    /// [`registry`] adds `work_dir` when it is not under one of them, so the paths the tools
    /// hand out are accepted by the others.
    pub roots: Roots,
    /// Where everything the tools carve or extract is written (`carved/<sha256>/…`, 0700
    /// directories, 0600 files): a directory the server owns, never the sample's folder.
    pub work_dir: WorkDir,
    /// The YARA rules directory: `*.yar` / `*.yara` files, optionally one sub-directory per ruleset.
    pub rules_dir: Option<PathBuf>,
    /// Compile the built-in YARA rules (`rules/*.yar`) into every "default" scan; off, the rules
    /// directory replaces them.
    pub builtin_rules: bool,
}

/// Every analysis tool, typed, with its timeout and optional dependency.
pub fn registry(mut config: AnalysisConfig) -> Registry {
    let work = config.work_dir.path().to_path_buf();
    if !config.roots.contains(&work) {
        let dirs = config.roots.dirs().iter().cloned().chain([work]);
        match Roots::new(dirs) {
            Ok(roots) => config.roots = roots,
            Err(e) => tracing::warn!("the work directory cannot be one of the roots: {e}"),
        }
    }
    let config = Arc::new(config);
    let mut registry = Registry::new();
    identify::register(&mut registry, &config);
    hashes::register(&mut registry, &config);
    strings::register(&mut registry, &config);
    iocs::register(&mut registry, &config);
    entropy::register(&mut registry, &config);
    pe::register(&mut registry, &config);
    elf::register(&mut registry, &config);
    macho::register(&mut registry, &config);
    archive::register(&mut registry, &config);
    document::register(&mut registry, &config);
    carve::register(&mut registry, &config);
    members::register(&mut registry, &config);
    search::register(&mut registry, &config);
    toolchain::register(&mut registry, &config);
    capabilities::register(&mut registry, &config);
    yara::register(&mut registry, &config);
    external::register(&mut registry, &config);
    unpack::register(&mut registry, &config);
    registry
}
