//! What code_capabilities reads from the code itself, where an import alone says too little:
//! `SetWindowsHookEx` is imported by MFC and many GUI programs (WH_CBT, WH_MSGFILTER hooks), but a
//! call with idHook 13 (WH_KEYBOARD_LL) is how a keylogger listens to every key. This finds the
//! instructions that reach the function's import slot (x64 `call/mov [rip+disp32]`, x86
//! `call/mov [abs32]`, and a jump thunk's callers) and looks just before each for the constant
//! the first argument is set from (`mov ecx, 13`; `push 13`; `mov dword [esp], 13`). The same
//! look finds VirtualAlloc asked for PAGE_EXECUTE_READWRITE (a description: JITs do it
//! too). A static look, not a disassembly: it sees the usual output of MSVC and mingw-w64.

use goblin::pe::PE;
use maljan_server::ToolError;

use crate::{
    budget::Budget, common::le_u32, common::le_u64, pe_parts::rva_to_offset, toolchain::Evidence,
};

/// How far before a reference to the import slot the idHook constant may be set.
const LOOK_BACK: usize = 48;
/// WH_KEYBOARD_LL set as the first argument: x64 `mov ecx, 13`, x86 `push 13` and
/// `mov dword ptr [esp], 13` (gcc without optimisation).
const KEYBOARD_LL: &[&[u8]] = &[
    &[0xB9, 0x0D, 0, 0, 0],
    &[0x6A, 0x0D],
    &[0xC7, 0x04, 0x24, 0x0D, 0, 0, 0],
];

/// The import slots (RVA of the IAT entry) of the functions named `name` + A/W, with
/// "DLL!function".
fn import_slots(
    b: &[u8],
    pe: &PE<'_>,
    name: &str,
    budget: &Budget,
) -> Result<Vec<(u32, String)>, ToolError> {
    let mut out = Vec::new();
    let Some(table) = pe
        .header
        .optional_header
        .as_ref()
        .and_then(|o| o.data_directories.get_import_table())
        .filter(|d| d.virtual_address != 0)
        .and_then(|d| rva_to_offset(pe, d.virtual_address))
    else {
        return Ok(out);
    };
    let width = if pe.is_64 { 8 } else { 4 };
    let cstr = |rva: u32| -> Option<&[u8]> {
        let rest = b.get(rva_to_offset(pe, rva)?..)?;
        let rest = &rest[..rest.len().min(512)];
        Some(&rest[..memchr::memchr(0, rest).unwrap_or(rest.len())])
    };
    for descriptor in (table..).step_by(20) {
        let (Some(lookup), Some(dll), Some(first_thunk)) = (
            le_u32(b, descriptor),
            le_u32(b, descriptor + 12),
            le_u32(b, descriptor + 16),
        ) else {
            break;
        };
        if lookup == 0 && dll == 0 && first_thunk == 0 {
            break;
        }
        budget.items(1, "import descriptors")?;
        let names_rva = if lookup != 0 { lookup } else { first_thunk };
        let Some(array) = rva_to_offset(pe, names_rva) else {
            continue;
        };
        for i in 0.. {
            let at = array + i * width;
            let thunk = if pe.is_64 {
                le_u64(b, at)
            } else {
                le_u32(b, at).map(u64::from)
            };
            let Some(thunk) = thunk.filter(|t| *t != 0) else {
                break;
            };
            budget.items(1, "imports")?;
            let by_ordinal = thunk & if pe.is_64 { 1 << 63 } else { 1 << 31 } != 0;
            if by_ordinal {
                continue;
            }
            let Some(func) = cstr((thunk as u32).wrapping_add(2)) else {
                continue;
            };
            let matches = func
                .strip_prefix(name.as_bytes())
                .is_some_and(|rest| matches!(rest, b"" | b"A" | b"W"));
            if matches {
                let dll = cstr(dll).map(String::from_utf8_lossy).unwrap_or_default();
                out.push((
                    first_thunk + (i * width) as u32,
                    format!("{dll}!{}", String::from_utf8_lossy(func)),
                ));
            }
        }
    }
    Ok(out)
}

/// The executable sections: (file offset, RVA, raw bytes).
fn code_sections<'a>(b: &'a [u8], pe: &PE<'_>) -> Vec<(usize, u32, &'a [u8])> {
    const EXECUTE: u32 = 0x2000_0000;
    pe.sections
        .iter()
        .filter(|s| s.characteristics & EXECUTE != 0)
        .filter_map(|s| {
            let start = s.pointer_to_raw_data as usize;
            let end = start.checked_add(s.size_of_raw_data as usize)?.min(b.len());
            Some((start, s.virtual_address, b.get(start..end)?))
        })
        .collect()
}

/// Where the code refers to `slot`: (section index, position in its bytes) of each 4-byte
/// displacement (x64, relative to the instruction's end) or address (x86, absolute) that reaches it.
fn references(
    sections: &[(usize, u32, &[u8])],
    pe: &PE<'_>,
    slot: u32,
    budget: &Budget,
) -> Result<Vec<(usize, usize)>, ToolError> {
    let image_base = pe.image_base;
    let mut out = Vec::new();
    for (si, (_, rva, data)) in sections.iter().enumerate() {
        budget.scan(data.len(), "the code search")?;
        for p in 0..data.len().saturating_sub(3) {
            let v = u32::from_le_bytes([data[p], data[p + 1], data[p + 2], data[p + 3]]);
            let hit = if pe.is_64 {
                let end = u64::from(*rva) + p as u64 + 4;
                end.wrapping_add(v as i32 as i64 as u64) == u64::from(slot)
            } else {
                u64::from(v) == image_base + u64::from(slot)
            };
            if hit {
                out.push((si, p));
            }
        }
        budget.check_cancel()?;
    }
    Ok(out)
}

/// PAGE_EXECUTE_READWRITE (0x40) as VirtualAlloc's 4th argument: x64 `mov r9d, 0x40`, x86
/// `push 0x40` and gcc's `mov dword [esp+12], 0x40`.
const RWX: &[&[u8]] = &[
    &[0x41, 0xB9, 0x40, 0, 0, 0],
    &[0x6A, 0x40],
    &[0xC7, 0x44, 0x24, 0x0C, 0x40, 0, 0, 0],
];

/// Calls of SetWindowsHookEx with idHook WH_KEYBOARD_LL (13), each as evidence.
pub fn keyboard_hooks(b: &[u8], budget: &Budget) -> Result<Vec<Evidence>, ToolError> {
    calls_with(
        b,
        budget,
        &["SetWindowsHookEx"],
        KEYBOARD_LL,
        "idHook 13 (WH_KEYBOARD_LL)",
    )
}

/// Calls of VirtualAlloc(Ex) asking for writable and executable memory. VirtualProtect is left
/// out: mingw-w64's C runtime makes its pseudo-relocations with VirtualProtect(…RWX) in every
/// program it links.
pub fn rwx_memory(b: &[u8], budget: &Budget) -> Result<Vec<Evidence>, ToolError> {
    calls_with(
        b,
        budget,
        &["VirtualAlloc", "VirtualAllocEx"],
        RWX,
        "PAGE_EXECUTE_READWRITE",
    )
}

/// The places the code calls the imports named `names` (+ A/W): (section index, position of the
/// 4-byte reference in its bytes, "DLL!function"), with `call rel32` callers of a jump thunk
/// (`jmp [slot]`) as sites too. With `thunks: false` the thunks' own references are left out
/// (they are a table of jumps, not a place in a function).
fn call_sites(
    b: &[u8],
    pe: &PE<'_>,
    sections: &[(usize, u32, &[u8])],
    names: &[&str],
    thunks: bool,
    budget: &Budget,
) -> Result<Vec<(usize, usize, String)>, ToolError> {
    let mut slots = Vec::new();
    for name in names {
        slots.extend(import_slots(b, pe, name, budget)?);
    }
    let mut out = Vec::new();
    for (slot, func) in slots {
        let sites = references(sections, pe, slot, budget)?;
        let is_thunk =
            |(si, p): &(usize, usize)| *p >= 2 && sections[*si].2[p - 2..*p] == [0xFF, 0x25];
        // A jump thunk (`jmp [slot]`) is reached by `call rel32`: its callers are sites too.
        let thunk_rvas: Vec<u32> = sites
            .iter()
            .filter(|s| is_thunk(s))
            .map(|(si, p)| sections[*si].1 + (*p as u32 - 2))
            .collect();
        for site in &sites {
            if thunks || !is_thunk(site) {
                out.push((site.0, site.1, func.clone()));
            }
        }
        if thunk_rvas.is_empty() {
            continue;
        }
        for (si, (_, rva, data)) in sections.iter().enumerate() {
            for p in 0..data.len().saturating_sub(4) {
                if data[p] != 0xE8 {
                    continue;
                }
                let rel = i32::from_le_bytes([data[p + 1], data[p + 2], data[p + 3], data[p + 4]]);
                let target = (i64::from(*rva) + p as i64 + 5 + i64::from(rel)) as u32;
                if thunk_rvas.contains(&target) {
                    out.push((si, p + 1, func.clone()));
                }
            }
        }
    }
    Ok(out)
}

/// Calls of the imports named `names` (+ A/W) with one of `constants` set just before, as
/// evidence naming `what` (one per import).
fn calls_with(
    b: &[u8],
    budget: &Budget,
    names: &[&str],
    constants: &[&[u8]],
    what: &str,
) -> Result<Vec<Evidence>, ToolError> {
    if !b.starts_with(b"MZ") {
        return Ok(Vec::new());
    }
    let Ok(pe) = crate::pe::parse(b) else {
        return Ok(Vec::new());
    };
    let sections = code_sections(b, &pe);
    let mut out: Vec<Evidence> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (si, p, func) in call_sites(b, &pe, &sections, names, true, budget)? {
        if seen.contains(&func) {
            continue;
        }
        if constant_before(sections[si].2, p, constants, LOOK_BACK) {
            out.push(Evidence {
                kind: "code".into(),
                detail: format!("call to {func} with {what}"),
                offset: Some((sections[si].0 + p) as u64),
            });
            seen.push(func);
        }
    }
    Ok(out)
}

/// Whether one of `constants` is set in the `look_back` bytes before position `p`.
fn constant_before(data: &[u8], p: usize, constants: &[&[u8]], look_back: usize) -> bool {
    let window = &data[p.saturating_sub(look_back)..p];
    constants
        .iter()
        .any(|pat| memchr::memmem::find(window, pat).is_some())
}

/// PAGE_EXECUTE_READWRITE (0x40) as VirtualProtect's 3rd argument (flNewProtect): x64
/// `mov r8d, 0x40`, x86 `push 0x40` and gcc's `mov dword [esp+8], 0x40`.
const RWX_PROTECT: &[&[u8]] = &[
    &[0x41, 0xB8, 0x40, 0, 0, 0],
    &[0x6A, 0x40],
    &[0xC7, 0x44, 0x24, 0x08, 0x40, 0, 0, 0],
];
/// The calls that start code at an address they are given: a thread, an APC, a fiber.
const START_CODE: &[&str] = &[
    "CreateThread",
    "CreateRemoteThread",
    "QueueUserAPC",
    "CreateFiber",
    "NtCreateThreadEx",
    "RtlCreateUserThread",
];
/// How far after the RWX call the code may be started for the two to be one act (one function's
/// worth of straight-line code).
const START_WINDOW: usize = 256;
/// How far after the RWX call a call through a register counts as a call into the new memory.
const CALL_WINDOW: usize = 64;
/// How far before the RWX call its protection may be set: an optimiser moves the argument set-up
/// up among the copy of the code (`mov r8d, 0x40` 67 bytes before VirtualProtect at gcc -O2).
const RWX_LOOK_BACK: usize = 96;
/// `call reg` (x86 and x64; `41 FF D0+r` for r8–r15 ends the same way).
fn call_through_register(pair: &[u8]) -> bool {
    pair[0] == 0xFF && (0xD0..=0xD7).contains(&pair[1])
}

/// Whether the register called at `i` was just loaded from memory at a fixed place — an import
/// slot or a global function pointer (`mov rax, [rip+disp32]`, x86 `mov eax, [abs32]`): how
/// unoptimised code calls every import, not a call into memory it allocated.
fn loaded_from_a_slot(data: &[u8], i: usize) -> bool {
    let rip_relative = |at: usize| {
        data.get(at..at + 3)
            .is_some_and(|m| (m[0] & 0xF0) == 0x40 && m[1] == 0x8B && (m[2] & 0xC7) == 0x05)
    };
    let absolute = |at: usize| {
        data.get(at..at + 2)
            .is_some_and(|m| m[0] == 0x8B && (m[1] & 0xC7) == 0x05)
    };
    (i >= 7 && rip_relative(i - 7))
        || (i >= 5 && data[i - 5] == 0xA1)
        || (i >= 6 && absolute(i - 6))
}

/// A shellcode loader's act: memory made writable and executable (VirtualAlloc(Ex) or
/// VirtualProtect(Ex) with PAGE_EXECUTE_READWRITE) and, in the same stretch of code just after,
/// code started in it — a thread, an APC or a fiber started within [`START_WINDOW`] bytes, or a
/// call through a register within [`CALL_WINDOW`] bytes. A JIT compiler makes RWX memory too, in
/// an allocator that hands the memory back rather than running it at once, so RWX alone stays a
/// description. Jump thunks are not sites (they are a table, not code of one function).
pub fn shellcode_runs(b: &[u8], budget: &Budget) -> Result<Vec<Evidence>, ToolError> {
    if !b.starts_with(b"MZ") {
        return Ok(Vec::new());
    }
    let Ok(pe) = crate::pe::parse(b) else {
        return Ok(Vec::new());
    };
    let sections = code_sections(b, &pe);
    let mut rwx: Vec<(usize, usize, String)> = Vec::new();
    for (names, constants) in [
        (&["VirtualAlloc", "VirtualAllocEx"][..], RWX),
        (&["VirtualProtect", "VirtualProtectEx"][..], RWX_PROTECT),
    ] {
        rwx.extend(
            call_sites(b, &pe, &sections, names, false, budget)?
                .into_iter()
                .filter(|(si, p, _)| {
                    constant_before(sections[*si].2, *p, constants, RWX_LOOK_BACK)
                }),
        );
    }
    if rwx.is_empty() {
        return Ok(Vec::new());
    }
    let starts = call_sites(b, &pe, &sections, START_CODE, false, budget)?;
    let mut out = Vec::new();
    for (si, p, func) in rwx {
        let data = sections[si].2;
        let started = starts
            .iter()
            .filter(|(sj, q, _)| *sj == si && *q > p && q - p <= START_WINDOW)
            .min_by_key(|(_, q, _)| *q)
            .map(|(_, q, start)| format!("{start} {} bytes later", q - p));
        let called = || {
            // `mov rax, [slot]; call rax` (gcc -O0) is the RWX call itself: look after it.
            // (Also caught by loaded_from_a_slot; skipping it keeps the count honest.)
            let mut from = p + 4;
            if data.get(from..from + 2).is_some_and(call_through_register) {
                from += 2;
            }
            let end = (p + 4 + CALL_WINDOW).min(data.len());
            (from..end.saturating_sub(1))
                .find(|&i| call_through_register(&data[i..i + 2]) && !loaded_from_a_slot(data, i))
                .map(|i| format!("a call through a register {} bytes later", i - p))
        };
        if let Some(then) = started.or_else(called) {
            out.push(Evidence {
                kind: "code".into(),
                detail: format!("call to {func} with PAGE_EXECUTE_READWRITE, then {then}"),
                offset: Some((sections[si].0 + p) as u64),
            });
        }
    }
    Ok(out)
}
