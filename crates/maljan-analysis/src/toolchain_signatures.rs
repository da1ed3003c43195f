//! The marks detect_packer knows each family by, kept as data: section names, entry-point stubs
//! and marker strings, with the few families whose mark is the file's first bytes in
//! [`FILE_START`]. The entry-point stubs follow the tools' public descriptions as Detect It Easy's
//! and PEiD's databases read them. UPX, NSIS, Go and MSVC are checked on real files beside DIE
//! (tests/packers_agree_with_die.rs); the others are in no package registry this machine reaches,
//! so their marks are checked on crafted headers only (tests/packers_documented_marks.rs) and are
//! untested on real samples.

use super::Category::{self, *};

/// A family known by its marks: any `sections` name (PE), any `entry` pattern at the entry point
/// (hex, `??` for any byte), any `strings` anywhere. `min` marks make a finding.
pub(super) struct Signature {
    pub(super) name: &'static str,
    pub(super) category: Category,
    pub(super) sections: &'static [&'static str],
    pub(super) entry: &'static [&'static str],
    pub(super) strings: &'static [&'static str],
    pub(super) min: usize,
}

const fn sig(
    name: &'static str,
    category: Category,
    sections: &'static [&'static str],
    entry: &'static [&'static str],
    strings: &'static [&'static str],
    min: usize,
) -> Signature {
    Signature {
        name,
        category,
        sections,
        entry,
        strings,
        min,
    }
}

/// The signatures. Strings are matched as bytes; `\0` ends a name so a prefix does not match.
pub(super) const SIGNATURES: &[Signature] = &[
    sig(
        "UPX",
        Packer,
        &["UPX0", "UPX1", "UPX2"],
        &[
            "60 BE ?? ?? ?? ?? 8D BE ?? ?? ?? ??",
            "53 56 57 55 48 8D 35",
        ],
        &[
            "UPX!",
            "$Info: This file is packed with the UPX executable packer",
        ],
        2,
    ),
    sig(
        "ASPack",
        Packer,
        &[".aspack", ".adata"],
        &["60 E8 03 00 00 00 E9 EB", "60 E8 00 00 00 00 5D 81 ED"],
        &["ASPack"],
        1,
    ),
    sig(
        "FSG",
        Packer,
        &[],
        &[
            "87 25 ?? ?? ?? ?? 61 94 55 A4 B6 ?? FF 13",
            "BB D0 01 40 00 BF 00 10 40 00 BE",
            "BE ?? ?? ?? ?? BF ?? ?? ?? ?? BB ?? ?? ?? ?? 53 BB ?? ?? ?? ?? B2 80",
            "BB ?? ?? ?? ?? BF ?? ?? ?? ?? BE ?? ?? ?? ?? 53 E8 0A 00 00 00 02 D2 75 05 8A 16 46 12 D2",
            "BB ?? ?? ?? ?? BF ?? ?? ?? ?? BE ?? ?? ?? ?? FC B2 80 8A 06 46 88 07 47 02 D2 75 05 8A 16",
            "BE ?? ?? ?? ?? AD 93 AD 97 AD 56 96 B2 80 A4 B6 80 FF 13 73",
            "BE ?? ?? ?? ?? AD 97 AD 56 96 83 CD ?? EB",
        ],
        &[],
        1,
    ),
    sig(
        "MEW",
        Packer,
        &["MEW", "MEWF"],
        &[
            "E9 ?? ?? ?? FF 0C ?? 00",
            "E9 ?? ?? ?? ?? 00 00 00 02 00 00 00 0C",
            "BE 5B 00 ?? ?? AD 91 AD 93 53 AD 96 56 5F AC C0 C0",
        ],
        &[],
        1,
    ),
    sig(
        "PESpin",
        Protector,
        &[".taz"],
        &[
            "EB 01 ?? 60 E8 00 00 00 00 8B 1C 24 83 C3",
            "55 48 81 EC 90 00 00 00 48 8D 6C 24 28 48 89 75",
        ],
        &[],
        1,
    ),
    sig(
        "Petite",
        Packer,
        &[".petite"],
        &[
            "B8 ?? ?? ?? ?? 66 9C 60 50",
            "66 9C 60 50 8B D8 03 00 68 54 BC 00 00 6A 00 FF 50 14 8B CC",
            "64 FF 35 00 00 00 00 64 89 25 00 00 00 00 66 9C 60 50 8B D8",
            "B8 ?? ?? ?? ?? 68 ?? ?? ?? ?? 64 FF 35 ?? ?? ?? ?? 64 89 25 ?? ?? ?? ?? 66 9C 60 50",
            "B8 ?? ?? ?? ?? 6A ?? 68 ?? ?? ?? ?? 64 FF 35 ?? ?? ?? ?? 64 89 25 ?? ?? ?? ?? 66 9C 60 50",
        ],
        &[],
        1,
    ),
    sig(
        "Upack",
        Packer,
        &[".Upack", ".ByDwing"],
        &[
            "BE ?? ?? ?? ?? AD 50 FF 76 34 EB 7C",
            "BE ?? ?? ?? ?? AD 8B F8 95 A5 33 C0 33",
            "BE ?? ?? ?? ?? AD 8B F8 6A 04 95 A5 33 C0 AB",
            "BE ?? ?? ?? ?? AD 8B F8 95 AD 91 F3 A5 AD B5",
            "6A 07 BE ?? ?? ?? ?? AD 8B F8 59 95 F3 A5",
            "BE ?? ?? ?? ?? FF 36 E9 C3 00 00 00",
        ],
        &["ByDwing"],
        1,
    ),
    sig(
        "WWPack32",
        Packer,
        &[".WWP32", ".WWPACK"],
        &["53 55 8B E8 33 DB EB 60"],
        &["WWPack32"],
        1,
    ),
    sig(
        "yoda's Crypter",
        Protector,
        &["yC", ".yC"],
        &["60 E8 00 00 00 00 5D 81 ED ?? ?? ?? ?? B9 ?? ?? 00 00 8D BD"],
        &[],
        1,
    ),
    sig("yoda's Protector", Protector, &[".yP"], &[], &[], 1),
    sig(
        "MPRESS",
        Packer,
        &[".MPRESS1", ".MPRESS2"],
        &[
            "60 E8 00 00 00 00 58 05",
            "57 56 53 51 52 41 50 48 8D 05 ?? ?? ?? ?? 48 8B 30 48 03 F0 48 2B C0 48 8B FE 66 AD C1 E0",
        ],
        &[],
        1,
    ),
    sig(
        "Themida/WinLicense",
        Protector,
        &[".themida", ".winlice", ".boot"],
        &[
            "B8 ?? ?? ?? ?? 60 0B C0 74 ?? E8 00 00 00 00 58 05",
            "83 EC 04 50 53 E8 01 00 00 00 CC 58 8B D8 40",
            "83 EC 04 50 53 E8 01 00 00 00 CC 58 89 C3 40",
            "48 83 EC 08 50 53 E8 01 00 00 00 CC 58 48 89 C3 48 FF C0",
            "8B C5 8B D4 60 E8 00 00 00 00 5D 81 ED",
            "55 8B EC 83 C4 D8 60 E8 00 00 00 00 5A 81 EA",
        ],
        &["Themida", "WinLicense"],
        1,
    ),
    sig(
        "VMProtect",
        Protector,
        &[".vmp0", ".vmp1", ".vmp2"],
        &[],
        &["VMProtect begin", "VMProtectSDK"],
        1,
    ),
    sig(
        "Enigma Protector",
        Protector,
        &[".enigma1", ".enigma2"],
        &[
            "60 E8 00 00 00 00 5D 81 ED ?? ?? ?? ?? 81 ED ?? ?? ?? ?? E9",
            "50 51 52 53 55 56 57 41 50 41 51 41 52 41 53 41 54 41 55 41 56 41 57 48 9C 48 81 EC 08 00 00 00 0F AE 1C 24 E8 00 00 00 00 5D",
        ],
        &["Enigma protector v"],
        1,
    ),
    sig(
        "PECompact",
        Packer,
        &[],
        &[
            "B8 ?? ?? ?? ?? 50 64 FF 35 00 00 00 00 64 89 25 00 00 00 00 33 C0 89 08",
            "B8 ?? ?? ?? ?? 05 ?? ?? ?? ?? 50 64 FF 35 00 00 00 00 64 89 25 00 00 00 00 CC 90 90 90 90",
            "B8 ?? ?? ?? ?? 55 53 51 57 56 52 8D 98 ?? ?? ?? ?? 8B 53 18 52 8B E8 6A 40 68 00 10 00 00 FF 73 04",
            "EB 06 68 ?? ?? ?? ?? C3 9C 60",
            "33 C0 8B C4 83 C0 04 93 8B E3 8B 5B FC 81",
        ],
        &[],
        1,
    ),
    sig(
        "Obsidium",
        Protector,
        &[],
        &[
            "E8 0E 00 00 00 8B 54 24 0C 83 82 B8 00 00 00",
            "E8 0E 00 00 00 33 C0 8B 54 24 0C 83 82 B8 00 00 00 0D C3 64 67 FF 36",
            "EB 02 ?? ?? E8 25 00 00 00 EB 04 ?? ?? ?? ?? EB 01 ?? 8B 54 24 0C EB 01",
            "EB 01 ?? E8 29 00 00 00 EB 02 ?? ?? EB 01 ?? 8B 54 24 0C EB 04",
            "EB 04 ?? ?? ?? ?? E8 29 00 00 00 EB 02 ?? ?? EB 01 ?? 8B 54 24 0C EB 02",
            "EB 01 ?? E8 26 00 00 00 EB 02 ?? ?? EB 02 ?? ?? 8B 54 24 0C EB 01",
            "EB 02 ?? ?? E8 28 00 00 00 EB 04 ?? ?? ?? ?? EB 01 ?? 8B 54 24 0C EB",
        ],
        &[],
        1,
    ),
    sig(
        ".NET Reactor",
        Protector,
        &[".reacto"],
        &["55 8B EC B9 0F 00 00 00 6A 00 6A 00 49 75 F9 51 53 56 57 B8 ?? ?? ?? ?? E8"],
        &[],
        1,
    ),
    sig(
        "NSIS",
        Installer,
        &[".ndata"],
        &[],
        &["Nullsoft Install System", "NullsoftInst", "NSIS Error"],
        1,
    ),
    sig(
        "Inno Setup",
        Installer,
        &[],
        &[],
        &[
            "Inno Setup Setup Data",
            "InnoSetupLdrWindow",
            "Inno Setup Messages",
            "rDlPtS",
        ],
        1,
    ),
    sig(
        "InstallShield",
        Installer,
        &[],
        &[],
        &["InstallShield", "ISSetupStream", "ISSetup.dll"],
        2,
    ),
    sig("WiX Burn", Installer, &[".wixburn"], &[], &[], 1),
    sig(
        "ConfuserEx",
        Obfuscator,
        &[],
        &[],
        &["ConfusedByAttribute", "ConfuserEx v"],
        1,
    ),
    sig(
        "Dotfuscator",
        Obfuscator,
        &[],
        &[],
        &["DotfuscatorAttribute"],
        1,
    ),
    sig(
        "SmartAssembly",
        Obfuscator,
        &[],
        &[],
        &["SmartAssembly.Attributes", "PoweredByAttribute"],
        1,
    ),
    sig(
        "PyInstaller",
        Packer,
        &[],
        &[],
        &["MEI\x0c\x0b\x0a\x0b\x0e", "_MEIPASS", "PyInstaller"],
        1,
    ),
    sig(
        "Nuitka",
        Compiler,
        &[],
        &[],
        &["NUITKA_ONEFILE_PARENT", "__nuitka_", "Nuitka"],
        1,
    ),
    sig(
        "AutoIt",
        Compiler,
        &[],
        &[],
        &["AU3!EA06", "AutoIt v3", ">>>AUTOIT SCRIPT<<<"],
        1,
    ),
    sig(
        "Go",
        Compiler,
        &[".symtab", ".go.buildinfo"],
        &[],
        &["\u{ff} Go buildinf:", "Go build ID: \"", "runtime.gopanic"],
        2,
    ),
    sig(
        "Rust",
        Compiler,
        &[],
        &[],
        &[
            "/rustc/",
            "RUST_BACKTRACE",
            "library/core/src/",
            "library/std/src/",
        ],
        2,
    ),
    sig(
        "Delphi",
        Compiler,
        &["CODE", "DATA", "BSS"],
        &[],
        &[
            "SOFTWARE\\Borland\\Delphi",
            "Embarcadero Delphi",
            "\x07TObject",
            "FastMM Borland",
        ],
        2,
    ),
    sig(
        "MinGW GCC",
        Compiler,
        &[],
        &[],
        &[
            "Mingw-w64 runtime failure",
            "libgcc_s_dw2-1.dll",
            "GCC: (GNU)",
            "__mingw_",
        ],
        1,
    ),
    sig("GCC", Compiler, &[], &[], &["GCC: ("], 1),
];

/// Families whose stub rewrites the file's first bytes: (family, hex pattern at offset 0).
pub(super) const FILE_START: &[(&str, &str)] = &[
    // Upack folds the PE header into the DOS header: "MZ" then the imported DLL's name, the PE
    // signature at 0x10.
    (
        "Upack",
        "4D 5A 4B 45 52 4E 45 4C 33 32 2E 44 4C 4C 00 00 50 45",
    ),
    (
        "Upack",
        "4D 5A 4C 6F 61 64 4C 69 62 72 61 72 79 41 00 00 50 45 00 00 4C 01 02 00 4B 45 52 4E 45 4C 33 32",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn well_formed(pat: &str) -> bool {
        pat.split_whitespace()
            .all(|t| t == "??" || (t.len() == 2 && u8::from_str_radix(t, 16).is_ok()))
    }

    #[test]
    fn every_pattern_is_hex_bytes_or_wildcards_and_starts_with_a_fixed_byte() {
        for s in SIGNATURES {
            for pat in s.entry {
                assert!(well_formed(pat), "{}: {pat}", s.name);
                assert_ne!(
                    pat.split_whitespace().next(),
                    Some("??"),
                    "{}: {pat}",
                    s.name
                );
                // Enough fixed bytes that ordinary compiler prologues do not match.
                let fixed = pat.split_whitespace().filter(|t| *t != "??").count();
                assert!(fixed >= 4, "{}: {pat} has {fixed} fixed bytes", s.name);
            }
        }
        for (name, pat) in FILE_START {
            assert!(well_formed(pat), "{name}: {pat}");
            assert!(
                pat.starts_with("4D 5A"),
                "{name}: a file start is an MZ header"
            );
        }
    }

    #[test]
    fn every_file_start_family_has_a_signature() {
        for (name, _) in FILE_START {
            assert!(SIGNATURES.iter().any(|s| s.name == *name), "{name}");
        }
    }

    #[test]
    fn a_section_name_names_one_family_only() {
        let mut seen = std::collections::BTreeMap::new();
        for s in SIGNATURES {
            for sec in s.sections {
                if let Some(other) = seen.insert(*sec, s.name) {
                    assert_eq!(other, s.name, "section {sec}");
                }
            }
        }
    }
}
