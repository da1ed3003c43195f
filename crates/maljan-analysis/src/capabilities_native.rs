//! Whether a PE is a *layer over the native API*: a DLL that forwards ntdll's system-call
//! functions (`Nt*`/`Zw*`) for other programs rather than calling them on a process of its own
//! choosing. Wine's and Windows' `wow64.dll` translates every system call a 32-bit program makes,
//! so it imports NtOpenProcess, NtAllocateVirtualMemory, NtWriteVirtualMemory, NtCreateThreadEx and
//! the debugger queries together with two hundred others; a subsystem or sandbox DLL exports a
//! wrapper of each native function it imports. In such a module the injection or anti-debug
//! combination is not a choice the code made — it is a slice of the whole interface it carries —
//! so code_capabilities describes it (with this basis as evidence) instead of accusing.
//!
//! The test is structural and hard to borrow: the module must be a DLL with an export table and
//! either import the native API *wholesale* (at least [`WHOLESALE`] distinct Nt/Zw functions from
//! ntdll, and those at least three quarters of all its imports: a layer over ntdll, not a program
//! using Windows' ordinary API) or *mirror* it (at least [`MIRRORED`] of its native imports, and at
//! least half of them, re-exported as wrappers: `NtFoo`, `ZwFoo`, `Foo`, or a name ending in
//! `NtFoo`/`ZwFoo`). And a rule is only excused when every group of it is met by forwarded native
//! imports and no other import: an injector DLL that adds a handful of wrappers, or imports
//! kernel32's WriteProcessMemory beside, still accuses. An EXE is never a layer.

use std::collections::BTreeSet;

/// Distinct native functions a DLL must import to be a layer over the whole interface (Wine's
/// wow64.dll imports 212; an injector needs four).
pub(crate) const WHOLESALE: usize = 128;
/// Native imports a DLL must re-export as wrappers to be a layer that mirrors the interface.
pub(crate) const MIRRORED: usize = 16;

/// A module that forwards native API functions, why, and which.
#[derive(Debug)]
pub(crate) struct NativeLayer {
    /// The basis, as evidence for the analyst.
    pub(crate) basis: String,
    /// The native functions (import names) it forwards.
    pub(crate) forwarded: BTreeSet<String>,
}

/// A native system-call function: `Nt`/`Zw` and a capital, imported from ntdll.
fn is_native(dll: &str, function: &str) -> bool {
    let dll = dll.to_ascii_lowercase();
    let from_ntdll = dll == "ntdll.dll" || dll == "ntdll";
    let named = (function.starts_with("Nt") || function.starts_with("Zw"))
        && function[2..].starts_with(|c: char| c.is_ascii_uppercase());
    from_ntdll && named
}

/// Whether `export` wraps the native function `native` (NtFoo): NtFoo, ZwFoo, Foo, or any name
/// ending in NtFoo or ZwFoo (wow64_NtFoo, MyNtFoo).
fn mirrors(export: &str, native: &str) -> bool {
    let stem = &native[2..];
    export == stem
        || ["Nt", "Zw"].iter().any(|prefix| {
            export
                .strip_suffix(stem)
                .is_some_and(|head| head.ends_with(prefix))
        })
}

/// The layer `imports` ((DLL, function)) and `exports` make of a module, if they make one.
pub(crate) fn native_layer(
    is_dll: bool,
    imports: &[(String, String)],
    exports: &[String],
) -> Option<NativeLayer> {
    if !is_dll || exports.is_empty() {
        return None;
    }
    let all: BTreeSet<(&str, &str)> = imports
        .iter()
        .map(|(d, f)| (d.as_str(), f.as_str()))
        .collect();
    let native: BTreeSet<String> = all
        .iter()
        .filter(|(d, f)| is_native(d, f))
        .map(|(_, f)| f.to_string())
        .collect();
    if native.len() >= WHOLESALE && native.len() * 4 >= all.len() * 3 {
        let share = native.len() * 100 / all.len().max(1);
        return Some(NativeLayer {
            basis: format!(
                "forwarded by a layer over the native API: a DLL importing {} of ntdll's \
                 Nt*/Zw* system-call functions ({share}% of its {} imports), so this \
                 combination is part of the interface it carries, not a choice of its code",
                native.len(),
                all.len()
            ),
            forwarded: native,
        });
    }
    let wrapped: BTreeSet<String> = native
        .iter()
        .filter(|n| exports.iter().any(|e| mirrors(e, n)))
        .cloned()
        .collect();
    if wrapped.len() >= MIRRORED && wrapped.len() * 2 >= native.len() {
        let examples: Vec<&str> = wrapped.iter().take(3).map(String::as_str).collect();
        return Some(NativeLayer {
            basis: format!(
                "forwarded by a layer over the native API: a DLL exporting wrappers of {} of \
                 the {} Nt*/Zw* functions it imports ({}, …), so this combination is part of \
                 the interface it offers, not a choice of its code",
                wrapped.len(),
                native.len(),
                examples.join(", ")
            ),
            forwarded: wrapped,
        });
    }
    None
}

impl NativeLayer {
    /// Whether an import (DLL, function) is one the layer forwards.
    pub(crate) fn forwards(&self, dll: &str, function: &str) -> bool {
        is_native(dll, function) && self.forwarded.contains(function)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ntdll(names: &[String]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| ("ntdll.dll".to_string(), n.clone()))
            .collect()
    }

    fn natives(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("NtFunction{i}")).collect()
    }

    #[test]
    fn a_dll_importing_the_native_api_wholesale_is_a_layer() {
        let imports = ntdll(&natives(WHOLESALE));
        let layer = native_layer(true, &imports, &["Wow64SystemServiceEx".into()]).unwrap();
        assert!(layer.forwards("NTDLL.DLL", "NtFunction7"));
        assert!(!layer.forwards("kernel32.dll", "NtFunction7"));
        assert!(
            layer.basis.contains("importing 128 of ntdll's"),
            "{}",
            layer.basis
        );
        // The same imports in an EXE, or in a DLL exporting nothing, are a program's.
        assert!(native_layer(false, &imports, &["Wow64SystemServiceEx".into()]).is_none());
        assert!(native_layer(true, &imports, &[]).is_none());
        // One short of wholesale is not a layer.
        let fewer = ntdll(&natives(WHOLESALE - 1));
        assert!(native_layer(true, &fewer, &["Export".into()]).is_none());
    }

    #[test]
    fn native_imports_drowned_in_ordinary_ones_are_no_layer() {
        let mut imports = ntdll(&natives(WHOLESALE));
        imports.extend((0..WHOLESALE).map(|i| ("kernel32.dll".to_string(), format!("Api{i}"))));
        assert!(native_layer(true, &imports, &["Export".into()]).is_none());
    }

    #[test]
    fn a_dll_exporting_wrappers_of_its_native_imports_is_a_layer() {
        let names = natives(MIRRORED);
        let exports: Vec<String> = names.iter().map(|n| format!("My{n}")).collect();
        let layer = native_layer(true, &ntdll(&names), &exports).unwrap();
        assert!(layer.forwards("ntdll.dll", "NtFunction0"));
        assert!(
            layer.basis.contains("wrappers of 16 of the 16"),
            "{}",
            layer.basis
        );
    }

    #[test]
    fn a_few_wrappers_do_not_excuse_an_injector() {
        let inject: Vec<String> = [
            "NtOpenProcess",
            "NtAllocateVirtualMemory",
            "NtWriteVirtualMemory",
            "NtCreateThreadEx",
        ]
        .map(String::from)
        .into();
        let exports: Vec<String> = inject.iter().map(|n| format!("Wrap{n}")).collect();
        assert!(native_layer(true, &ntdll(&inject), &exports).is_none());
        // Wrappers of under half its native imports: not a mirror either.
        let imports = natives(MIRRORED * 3);
        let exports: Vec<String> = imports[..MIRRORED]
            .iter()
            .map(|n| format!("x_{n}"))
            .collect();
        assert!(native_layer(true, &ntdll(&imports), &exports).is_none());
    }

    #[test]
    fn wrapper_names_that_mirror_a_native_function() {
        for export in [
            "NtOpenProcess",
            "ZwOpenProcess",
            "OpenProcess",
            "wow64_NtOpenProcess",
            "MyZwOpenProcess",
        ] {
            assert!(mirrors(export, "NtOpenProcess"), "{export}");
        }
        for export in [
            "OpenProcessToken",
            "XOpenProcess",
            "NtOpenProcessEx",
            "Process",
        ] {
            assert!(!mirrors(export, "NtOpenProcess"), "{export}");
        }
        assert!(!is_native("ntdll.dll", "Ntohs"));
        assert!(!is_native("kernel32.dll", "NtClose"));
    }
}
