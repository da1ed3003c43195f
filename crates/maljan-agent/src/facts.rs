//! The facts table: what each finding of each tool means, named once. The heuristic verdict is
//! computed from these facts (see [`crate::heuristic`]), the judge is shown them, and a model's
//! verdict that contradicts them is flagged beside them.
//!
//! A fact counts **once**, however many tools report it: UPX seen by the YARA rule `Packer_UPX`,
//! by detect_packer, by code_capabilities (T1027.002) and by pe_info's writable-and-executable
//! UPX0/UPX1 sections is one `packed` fact with every evidence id. Each fact has a weight, a
//! leaning (malicious, benign or neutral) and whether it is *strong*: a strong fact is one
//! ordinary software seldom shows.
//!
//! | id | fact | leaning | weight | strong | established by |
//! |---|---|---|---|---|---|
//! | `known_bad_signature` | matches a signature for known-bad content | malicious | 5 | yes | yara_scan: a *detection* rule (built-in, or a third-party rule not marked identification) |
//! | `process_injection` | can write code into another process and run it | malicious | 3 | yes | code_capabilities (T1055, T1055.012, discriminating); yara API_Process_Injection |
//! | `persistence` | makes itself start again (writes a Run key) | malicious | 3 | yes | code_capabilities (T1547.001 Run key + writer); yara Persistence_Run_Key |
//! | `keylogging` | captures keystrokes (a low-level keyboard hook) | malicious | 3 | yes | code_capabilities (T1056.001, SetWindowsHookEx with WH_KEYBOARD_LL) |
//! | `credential_access` | reads a credential store or dumps LSASS | malicious | 3 | yes | code_capabilities (T1003.001, T1555) |
//! | `download_execute` | downloads a file and runs it | malicious | 3 | yes | code_capabilities (T1105 with an exec API); yara API_Download_Execute, Downloader_PowerShell_Cradle |
//! | `inhibit_recovery` | deletes shadow copies or disables recovery | malicious | 3 | yes | code_capabilities (T1490) |
//! | `encrypts_for_ransom` | encrypts files and leaves a ransom note | malicious | 3 | yes | code_capabilities (T1486: a ransom note's words with an encryption API) |
//! | `shellcode_loader` | runs code in memory it made writable and executable | malicious | 3 | yes | code_capabilities (T1620, discriminating: VirtualAlloc/VirtualProtect with PAGE_EXECUTE_READWRITE, then a thread, APC or fiber started, or a call through a register, just after; RWX alone is described) |
//! | `anti_analysis` | checks deliberately for a debugger, a VM or a sandbox | malicious | 2 | yes | code_capabilities (T1622, T1497.001, discriminating) |
//! | `auto_exec_macro` | runs macros or actions when the document opens | malicious | 3 | yes | document_info (auto_exec); yara Dropper_Office_Macro_Autoexec |
//! | `carries_executable` | carries an executable program — in a document, mail or help file | malicious | 3 | yes | extract_members (a pe/elf/macho/msi child); yara Dropper_Embedded_PE |
//! | `carries_executable` | … — in an archive or other data | malicious | 2 | no | same |
//! | `carries_executable` | … — in an executable (installer payload, overlay) | neutral | 0 | no | same |
//! | `decompression_bomb` | a member expands past the ratio limit | malicious | 3 | yes | the recursion's ratio limit |
//! | `child_malicious` | a child sample is malicious (its path in `child`) | malicious | 5 | yes | the child's own verdict |
//! | `child_suspicious` | a child sample is suspicious | malicious | 2 | no | the child's own verdict |
//! | `deceptive_name` | a member's name deceives (double extension, right-to-left override) | malicious | 2 | no | extract_members flags |
//! | `encrypted_member` | a member is locked with a malware-exchange password (infected, …) | malicious | 2 | no | extract_members |
//! | `beaconing` | hard-coded IP address and code to talk to it | malicious | 2 | no | iocs_from_file (confident IPs) + code_capabilities (T1095, T1071.001) |
//! | `macros` | carries macros or scripts (not auto-executing) | malicious | 1 | no | document_info |
//! | `signature_mismatch` | the Authenticode signature does not match the file (changed after signing) or does not verify | malicious | 2 | no | detect_packer `signature` (digest differs, signer's signature or a chain link fails) |
//! | `format_anomaly` | a malformed structure (entry point outside the code, …) | malicious | 1 | no | pe_info, elf_info, macho_info anomalies |
//! | `packed` | packed or protected | neutral | 1 | no | detect_packer, yara identification rules, code_capabilities T1027.002, packing anomalies (W+X, high entropy, no imports) |
//! | `network_indicators` | names hosts or addresses (confident IOCs) | neutral | 1 | no | iocs_from_file `counts` |
//! | `described_capabilities` | what ordinary programs also do (T1129, T1083, a debugger check from the C runtime, a socket …) | neutral | 0 | no | code_capabilities, not discriminating |
//! | `identified_as` | identified as a known file kind, compiler or tool | neutral | 0 | no | yara identification rules, detect_packer (compiler) |
//! | `format_note` | structural notes every build tool leaves (zeroed timestamp, overlay) | neutral | 0 | no | pe_info |
//! | `valid_signature` | a valid Authenticode signature: the image digest matches the signed one, the signer's signature and the chain to a certificate vouching for it verify (no trust store: the signer is named for the analyst) | benign | 2 | no | detect_packer `signature` |
//! | `installer_layout` | a known installer's layout (NSIS, Inno Setup) | benign | 2 | no | detect_packer (installer), yara Installer_* |
//! | `runtime_typical_imports` | an ordinary import table: ≥ 20 functions, and nothing described beyond what the C runtime does (T1129, T1083, T1082, T1622) | benign | 1 | no | pe_info, elf_info, code_capabilities |
//! | `inert_content` | plain text: no script, macro or executable content | benign | 1 | no | identify_file / extract_members (kind `text`) |
//! | `no_active_content` | a document without macros, scripts, actions or embedded files | benign | 1 | no | document_info |
//! | `members_benign` | every child sample is benign | benign | 1 | no | the children's verdicts |

use std::collections::BTreeSet;

use maljan_triage::report::{Fact, Leaning};

/// One row of the facts table.
#[derive(Debug, Clone, Copy)]
pub struct FactDef {
    pub id: &'static str,
    pub name: &'static str,
    pub leaning: Leaning,
    pub weight: u32,
    pub strong: bool,
    /// The tools (and findings) that can establish it.
    pub established_by: &'static str,
}

const fn def(
    id: &'static str,
    name: &'static str,
    leaning: Leaning,
    weight: u32,
    strong: bool,
    established_by: &'static str,
) -> FactDef {
    FactDef {
        id,
        name,
        leaning,
        weight,
        strong,
        established_by,
    }
}

use Leaning::{Benign as B, Malicious as M, Neutral as N};

/// The facts table (the module documentation shows it; `carries_executable` changes weight with
/// its carrier, see [`carries_executable`]).
#[rustfmt::skip]
pub const TABLE: &[FactDef] = &[
    def("known_bad_signature", "matches a signature for known-bad content", M, 5, true, "yara_scan detection rules"),
    def("process_injection", "can write code into another process and run it", M, 3, true, "code_capabilities T1055; yara API_Process_Injection"),
    def("persistence", "makes itself start again (writes a Run key)", M, 3, true, "code_capabilities T1547.001; yara Persistence_Run_Key"),
    def("keylogging", "captures keystrokes with a low-level keyboard hook", M, 3, true, "code_capabilities T1056.001"),
    def("credential_access", "reads a credential store or dumps LSASS", M, 3, true, "code_capabilities T1003.001, T1555"),
    def("download_execute", "downloads a file and runs it", M, 3, true, "code_capabilities T1105; yara API_Download_Execute, Downloader_PowerShell_Cradle"),
    def("inhibit_recovery", "deletes shadow copies or disables recovery", M, 3, true, "code_capabilities T1490"),
    def("encrypts_for_ransom", "encrypts files and leaves a ransom note", M, 3, true, "code_capabilities T1486"),
    def("shellcode_loader", "runs code in memory it made writable and executable (a shellcode loader)", M, 3, true, "code_capabilities T1620 (RWX then a thread or call into it)"),
    def("anti_analysis", "checks deliberately for a debugger, a VM or a sandbox", M, 2, true, "code_capabilities T1622, T1497.001"),
    def("auto_exec_macro", "runs macros or actions when the document opens", M, 3, true, "document_info; yara Dropper_Office_Macro_Autoexec"),
    def("carries_executable", "carries an executable program", M, 3, true, "extract_members; yara Dropper_Embedded_PE"),
    def("decompression_bomb", "a member expands past the ratio limit (a decompression bomb)", M, 3, true, "the recursion's ratio limit"),
    def("child_malicious", "a child sample is malicious", M, 5, true, "the child's verdict"),
    def("child_suspicious", "a child sample is suspicious", M, 2, false, "the child's verdict"),
    def("deceptive_name", "a member's name deceives (double extension, right-to-left override)", M, 2, false, "extract_members"),
    def("encrypted_member", "a member is locked with a malware-exchange password", M, 2, false, "extract_members"),
    def("beaconing", "a hard-coded IP address and the code to talk to it", M, 2, false, "iocs_from_file + code_capabilities"),
    def("macros", "carries macros or scripts (not auto-executing)", M, 1, false, "document_info"),
    def("signature_mismatch", "the Authenticode signature does not match the file or does not verify", M, 2, false, "detect_packer signature"),
    def("format_anomaly", "a malformed structure", M, 1, false, "pe_info, elf_info, macho_info"),
    def("packed", "packed or protected", N, 1, false, "detect_packer, yara, code_capabilities T1027.002, pe_info/elf_info"),
    def("network_indicators", "names network hosts or addresses", N, 1, false, "iocs_from_file"),
    def("described_capabilities", "capabilities ordinary programs also have (described, not scored)", N, 0, false, "code_capabilities"),
    def("identified_as", "identified as a known kind, compiler or tool", N, 0, false, "yara identification rules, detect_packer"),
    def("format_note", "structural notes ordinary builds leave", N, 0, false, "pe_info"),
    def("valid_signature", "a valid Authenticode signature (digest, signer and chain verified)", B, 2, false, "detect_packer signature"),
    def("installer_layout", "the layout of a known installer", B, 2, false, "detect_packer, yara Installer_*"),
    def("runtime_typical_imports", "an ordinary import table, nothing beyond what the C runtime does", B, 1, false, "pe_info, elf_info, code_capabilities"),
    def("inert_content", "plain text, no script, macro or executable content", B, 1, false, "identify_file, extract_members"),
    def("no_active_content", "a document without macros, scripts, actions or embedded files", B, 1, false, "document_info"),
    def("members_benign", "every child sample is benign", B, 1, false, "the children's verdicts"),
];

/// The table row of `id` (every id the heuristic uses is in the table).
pub fn lookup(id: &str) -> Option<&'static FactDef> {
    TABLE.iter().find(|d| d.id == id)
}

/// Where an executable was found, which sets the weight of `carries_executable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// A document, a mail or a help file: how most malware arrives. Strong.
    Document,
    /// An archive or other data (software ships in zips): a fact of weight, not a verdict.
    Archive,
    /// Another executable (an installer's payload, an overlay): described only.
    Executable,
}

/// identify_file kinds of documents, mails and help files.
const DOCUMENT_KINDS: &[&str] = &[
    "pdf", "ooxml", "odf", "ole2", "rtf", "html", "hta", "xml", "email", "eml", "mbox", "msg",
    "chm", "tnef", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "onenote",
];
/// extract_members sources that only documents and mails have.
const DOCUMENT_SOURCES: &[&str] = &[
    "pdf",
    "rtf",
    "ole10native",
    "ole2",
    "mime",
    "mbox",
    "tnef",
    "chm",
    "html",
];
const EXECUTABLE_KINDS: &[&str] = &["pe", "elf", "macho", "msi"];

/// Whether identify_file's `kind` is an executable program.
pub fn is_executable(kind: &str) -> bool {
    EXECUTABLE_KINDS.contains(&kind)
}

impl Carrier {
    /// The carrier of a child found by `source` inside a sample of kind `parent_kind`.
    pub fn of(parent_kind: Option<&str>, source: &str) -> Self {
        let kind = parent_kind.unwrap_or("");
        if DOCUMENT_KINDS.contains(&kind) || DOCUMENT_SOURCES.contains(&source) {
            Self::Document
        } else if is_executable(kind) {
            Self::Executable
        } else {
            Self::Archive
        }
    }
}

/// The `carries_executable` row for a carrier.
pub fn carries_executable(carrier: Carrier) -> FactDef {
    let base = *lookup("carries_executable").expect("in the table");
    match carrier {
        Carrier::Document => FactDef {
            name: "a document, mail or help file carries an executable program",
            ..base
        },
        Carrier::Archive => FactDef {
            name: "carries an executable program (in an archive or data: weight, not a verdict)",
            weight: 2,
            strong: false,
            ..base
        },
        Carrier::Executable => FactDef {
            name: "carries another executable (an installer payload or overlay)",
            leaning: Leaning::Neutral,
            weight: 0,
            strong: false,
            ..base
        },
    }
}

/// The facts of one sample, each once, gathered from the findings. Observations whose evidence is
/// not in the job's ledger are dropped (a fact stands only on calls that were made).
pub struct Facts<'a> {
    ledger: &'a BTreeSet<String>,
    pub list: Vec<Fact>,
    /// A family named by a known-bad signature (the rule's `family` metadata).
    pub family: Option<String>,
}

impl<'a> Facts<'a> {
    pub fn new(ledger: &'a BTreeSet<String>) -> Self {
        Self {
            ledger,
            list: Vec::new(),
            family: None,
        }
    }

    /// Adds an observation to the fact `id` of the table.
    pub fn add(&mut self, id: &str, observation: impl Into<String>, evidence: &[String]) {
        let def = *lookup(id).unwrap_or_else(|| panic!("fact {id} is not in the table"));
        self.add_def(def, None, observation, evidence);
    }

    /// Adds an observation to the fact `def` (for `child`, when it comes from a child sample).
    /// The same id (and child) merges: one fact, every observation and evidence id. A fact whose
    /// row differs by context (carries_executable) keeps its heaviest form.
    pub fn add_def(
        &mut self,
        def: FactDef,
        child: Option<String>,
        observation: impl Into<String>,
        evidence: &[String],
    ) {
        if evidence.is_empty() || !evidence.iter().all(|e| self.ledger.contains(e)) {
            return;
        }
        let observation = observation.into();
        let fact = match self
            .list
            .iter_mut()
            .position(|f| f.id == def.id && f.child == child)
        {
            Some(i) => &mut self.list[i],
            None => {
                self.list.push(Fact {
                    id: def.id.to_string(),
                    name: def.name.to_string(),
                    leaning: def.leaning,
                    weight: def.weight,
                    strong: def.strong,
                    observations: Vec::new(),
                    evidence: Vec::new(),
                    child,
                });
                self.list.last_mut().expect("just pushed")
            }
        };
        if def.weight > fact.weight || (def.strong && !fact.strong) {
            fact.name = def.name.to_string();
            fact.leaning = def.leaning;
            fact.weight = def.weight;
            fact.strong = def.strong;
        }
        if !fact.observations.contains(&observation) {
            fact.observations.push(observation);
        }
        for e in evidence {
            if !fact.evidence.contains(e) {
                fact.evidence.push(e.clone());
            }
        }
    }

    pub fn has(&self, id: &str) -> bool {
        self.list.iter().any(|f| f.id == id)
    }
}

/// The fact a code_capabilities technique establishes when its rule is discriminating.
pub fn technique_fact(technique: &str) -> Option<&'static str> {
    let base = technique.split('.').next().unwrap_or(technique);
    Some(match (base, technique) {
        (_, "T1027.002") => "packed",
        ("T1055", _) => "process_injection",
        ("T1547" | "T1543" | "T1053" | "T1574", _) => "persistence",
        ("T1056", _) => "keylogging",
        ("T1003" | "T1555" | "T1552", _) => "credential_access",
        ("T1105", _) => "download_execute",
        ("T1490", _) => "inhibit_recovery",
        ("T1486", _) => "encrypts_for_ransom",
        ("T1620", _) => "shellcode_loader",
        ("T1622" | "T1497", _) => "anti_analysis",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_is_in_the_table_once_and_the_table_matches_its_rules() {
        let mut ids: Vec<&str> = TABLE.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "an id twice in the table");
        for d in TABLE {
            // Strong facts lean malicious; benign and neutral facts never are strong.
            assert!(!d.strong || d.leaning == Leaning::Malicious, "{}", d.id);
            // The module documentation lists every row.
            let doc = include_str!("facts.rs");
            assert!(
                doc.contains(&format!("//! | `{}` |", d.id)),
                "{} undocumented",
                d.id
            );
        }
        for t in [
            "T1055",
            "T1547.001",
            "T1056.001",
            "T1003.001",
            "T1105",
            "T1490",
            "T1620",
            "T1622",
        ] {
            assert!(lookup(technique_fact(t).unwrap()).is_some(), "{t}");
        }
        assert_eq!(technique_fact("T1129"), None);
        assert_eq!(technique_fact("T1083"), None);
    }

    #[test]
    fn a_fact_counts_once_with_every_evidence_id() {
        let ledger: BTreeSet<String> = ["ev_1", "ev_2", "ev_3"].map(String::from).into();
        let mut f = Facts::new(&ledger);
        f.add("packed", "yara_scan: rule Packer_UPX", &["ev_1".into()]);
        f.add("packed", "detect_packer: UPX", &["ev_2".into()]);
        f.add(
            "packed",
            "code_capabilities: packed with UPX (T1027.002)",
            &["ev_3".into()],
        );
        f.add(
            "packed",
            "pe_info: section UPX0 is writable and executable",
            &["ev_3".into()],
        );
        // Not in the ledger: dropped.
        f.add("process_injection", "made up", &["ev_9".into()]);
        assert_eq!(f.list.len(), 1);
        assert_eq!(f.list[0].observations.len(), 4);
        assert_eq!(f.list[0].evidence, ["ev_1", "ev_2", "ev_3"]);
    }

    #[test]
    fn the_carrier_sets_the_weight_of_an_executable_inside() {
        assert_eq!(Carrier::of(Some("pdf"), "pdf"), Carrier::Document);
        assert_eq!(Carrier::of(Some("ole2"), "ole10native"), Carrier::Document);
        assert_eq!(Carrier::of(Some("email"), "mime"), Carrier::Document);
        assert_eq!(Carrier::of(Some("zip"), "zip"), Carrier::Archive);
        assert_eq!(Carrier::of(Some("pe"), "carved"), Carrier::Executable);
        assert!(carries_executable(Carrier::Document).strong);
        assert!(!carries_executable(Carrier::Archive).strong);
        assert_eq!(carries_executable(Carrier::Archive).weight, 2);
        assert_eq!(
            carries_executable(Carrier::Executable).leaning,
            Leaning::Neutral
        );
    }
}
