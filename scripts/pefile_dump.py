#!/usr/bin/env python3
"""Prints, as one JSON object keyed by path (relative to DIR), what pefile reads from each PE
(file starting with MZ) under a directory —
the fields pe_info reports too (crates/maljan-analysis/tests/pe_parity.rs compares them):
sections, entry point, imports, delay imports, bound imports, exports, TLS callbacks, overlay.

Usage: pefile_dump.py DIR [SUBDIR...]   (only those subdirectories when given; needs pefile:
the peers venv, scripts/peers.sh)
"""

import json
import os
import sys

import pefile


def text(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def functions(dll, imports):
    out = []
    for imp in imports:
        if imp.import_by_ordinal:
            name = imp.name if dll.lower() in ("ws2_32.dll", "wsock32.dll") and imp.name else None
            out.append(text(name) if name else "ord%d" % imp.ordinal)
        elif imp.name:
            out.append(text(imp.name))
    return out


def merged(entries):
    """Consecutive descriptors of one DLL as one entry, descriptors without functions left out
    (pe_info lists them so)."""
    out = []
    for e in entries or []:
        dll = text(e.dll)
        funcs = functions(dll, e.imports)
        if not funcs:
            continue
        if out and out[-1]["dll"] == dll:
            out[-1]["functions"] += funcs
        else:
            out.append({"dll": dll, "functions": funcs})
    return out


def tls_callbacks(pe):
    if not hasattr(pe, "DIRECTORY_ENTRY_TLS"):
        return []
    array = pe.DIRECTORY_ENTRY_TLS.struct.AddressOfCallBacks
    if not array:
        return []
    is64 = pe.PE_TYPE == pefile.OPTIONAL_HEADER_MAGIC_PE_PLUS
    rva = array - pe.OPTIONAL_HEADER.ImageBase
    out = []
    while len(out) < 256:
        v = pe.get_qword_at_rva(rva) if is64 else pe.get_dword_at_rva(rva)
        if not v:
            break
        out.append(v)
        rva += 8 if is64 else 4
    return out


def long_name(pe, name):
    """A `/N` section name resolved in the COFF string table (after the symbol table), as
    objdump and pe_info show it; pefile leaves the reference."""
    if not name.startswith(b"/") or not name[1:].isdigit():
        return name
    table = pe.FILE_HEADER.PointerToSymbolTable
    if not table:
        return name
    at = table + 18 * pe.FILE_HEADER.NumberOfSymbols + int(name[1:])
    rest = pe.__data__[at : at + 256]
    end = rest.find(b"\0")
    return rest[:end] if end >= 0 else name


def dump(path):
    try:
        # Only the directories compared are parsed (the overlay reads the headers' entries).
        pe = pefile.PE(path, fast_load=True)
        pe.parse_data_directories(directories=[0, 1, 9, 11, 13])
    except pefile.PEFormatError as e:
        return {"error": str(e)}
    exports = None
    if hasattr(pe, "DIRECTORY_ENTRY_EXPORT"):
        d = pe.DIRECTORY_ENTRY_EXPORT
        exports = {
            "dll_name": text(d.name) if d.name else None,
            "functions": [
                {
                    "name": text(s.name) if s.name is not None else None,
                    "ordinal": s.ordinal,
                    "rva": s.address,
                    "forward": text(s.forwarder) if s.forwarder else None,
                }
                for s in d.symbols
            ],
        }
    return {
        "entry_point": pe.OPTIONAL_HEADER.AddressOfEntryPoint,
        "sections": [
            {
                "name": text(long_name(pe, s.Name.split(b"\0")[0])),
                "virtual_address": s.VirtualAddress,
                "virtual_size": s.Misc_VirtualSize,
                "raw_offset": s.PointerToRawData,
                "raw_size": s.SizeOfRawData,
            }
            for s in pe.sections
        ],
        "imports": merged(getattr(pe, "DIRECTORY_ENTRY_IMPORT", None)),
        "delay_imports": merged(getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", None)),
        "bound_imports": [
            {
                "dll": text(b.name),
                "timestamp": b.struct.TimeDateStamp,
                "forwarders": [text(f.name) for f in b.entries if f.name],
            }
            for b in getattr(pe, "DIRECTORY_ENTRY_BOUND_IMPORT", None) or []
        ],
        "exports": exports,
        "tls_callbacks": tls_callbacks(pe),
        "overlay_offset": pe.get_overlay_data_start_offset(),
    }


def main():
    root = sys.argv[1]
    tops = [os.path.join(root, d) for d in sys.argv[2:]] or [root]
    out = {}
    for top in tops:
        for folder, _, names in os.walk(top):
            for name in sorted(names):
                path = os.path.join(folder, name)
                with open(path, "rb") as fh:
                    if fh.read(2) != b"MZ":
                        continue
                out[os.path.relpath(path, root)] = dump(path)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
