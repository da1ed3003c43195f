#!/usr/bin/env python3
"""Prints, as one JSON object keyed by file name, what LLVM's llvm-objdump reads from each
Mach-O file (*.macho) in a directory — the fields macho_info reports too
(crates/maljan-analysis/tests/macho_parity.rs compares them): the universal header's slices
(`--universal-headers`), then per slice (`--arch NAME`) or for the thin file the Mach header
and every load command (`--private-headers`): cpu, bits, file type, flags, the commands' names
and sizes, segments and their sections, linked dylibs (weak ones apart), rpaths, install name,
UUID, LC_CODE_SIGNATURE's presence and the entry point — LC_MAIN's offset placed by __TEXT as
dyld places it, else LC_UNIXTHREAD's program counter. A file or slice llvm-objdump refuses as
malformed gives {"error": its message} instead.

Usage: macho_dump.py DIR   (stdlib only; needs llvm-objdump on PATH, or LLVM_OBJDUMP)
"""

import json
import os
import re
import subprocess
import sys

OBJDUMP = os.environ.get("LLVM_OBJDUMP", "llvm-objdump")
# llvm-objdump's names for the header fields, in macho_info's words.
CPU = {"I386": "x86", "X86_64": "x86-64", "ARM": "ARM", "ARM64": "ARM64", "ARM64_32": "ARM64_32",
       "PPC": "PowerPC", "PPC64": "PowerPC64"}
FILETYPE = {"OBJECT": "object", "EXECUTE": "executable", "FVMLIB": "fixed_vm_library",
            "CORE": "core", "PRELOAD": "preload", "DYLIB": "dylib", "DYLINKER": "dylinker",
            "BUNDLE": "bundle", "DYLIB_STUB": "dylib_stub", "DSYM": "dsym",
            "KEXT_BUNDLE": "kext_bundle"}
LINKED = {"LC_LOAD_DYLIB", "LC_LOAD_WEAK_DYLIB", "LC_REEXPORT_DYLIB", "LC_LAZY_LOAD_DYLIB",
          "LC_LOAD_UPWARD_DYLIB"}
PC = re.compile(r"\b(?:rip|eip|pc)\s+0x([0-9a-f]+)")


def objdump(*args):
    out = subprocess.run([OBJDUMP, "--macho", *args], capture_output=True, text=True)
    error = re.search(r"error: .*?: (.*)", out.stderr)
    return out.stdout, error.group(1).strip() if error else None


def fields(block):
    """The `key value` lines of one llvm-objdump block."""
    out = {}
    for line in block.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0] not in out:
            out[parts[0]] = parts[1]
    return out


def number(text):
    return int(text.split()[0], 0)


def rwx(text):
    return text.strip()


def header_flags(printed):
    """The header flags' names as <mach-o/loader.h> has them, `MH_` dropped, lower case.
    llvm-objdump 14 prints MH_NO_HEAP_EXECUTION with its prefix (alone of all), and a zero
    flags word as 0x00000000."""
    names = [f.lower().removeprefix("mh_") for f in printed]
    return sorted(n for n in names if n != "0x00000000")


def image(text):
    """One Mach-O image's --private-headers output."""
    lines = text.splitlines()
    at = lines.index("Mach header")
    magic, cputype, _, _, filetype, _, _, *flags = lines[at + 2].split()
    arch = {
        "cpu": CPU.get(cputype, "other"),
        "bits": 64 if magic == "MH_MAGIC_64" else 32,
        "file_type": FILETYPE.get(filetype, "other"),
        "flags": header_flags(flags),
        "load_commands": [], "segments": [], "sections": [], "libraries": [],
        "weak_libraries": [], "rpaths": [], "install_name": None, "uuid": None,
        "code_signature": False,
    }
    main_offset, pc = None, None
    blocks = re.split(r"^Load command \d+\n", text, flags=re.M)[1:]
    for block in blocks:
        parts = re.split(r"^Section\n", block, flags=re.M)
        f = fields(parts[0])
        cmd = f["cmd"]
        arch["load_commands"].append({"name": cmd, "size": number(f["cmdsize"])})
        if cmd in ("LC_SEGMENT", "LC_SEGMENT_64"):
            arch["segments"].append({
                "name": f.get("segname", ""), "vmaddr": number(f["vmaddr"]),
                "vmsize": number(f["vmsize"]), "fileoff": number(f["fileoff"]),
                "filesize": number(f["filesize"]), "protection": rwx(f["initprot"]),
                "max_protection": rwx(f["maxprot"]),
            })
            for section in parts[1:]:
                s = fields(section)
                arch["sections"].append({
                    "name": f"{s['segname']},{s['sectname']}", "address": number(s["addr"]),
                    "offset": number(s["offset"]), "size": number(s["size"]),
                })
        elif cmd in LINKED:
            name = f["name"].rsplit(" (offset", 1)[0]
            arch["libraries"].append(name)
            if cmd == "LC_LOAD_WEAK_DYLIB":
                arch["weak_libraries"].append(name)
        elif cmd == "LC_ID_DYLIB":
            arch["install_name"] = f["name"].rsplit(" (offset", 1)[0]
        elif cmd == "LC_RPATH":
            arch["rpaths"].append(f["path"].rsplit(" (offset", 1)[0])
        elif cmd == "LC_UUID":
            arch["uuid"] = f["uuid"].replace("-", "").upper()
        elif cmd == "LC_CODE_SIGNATURE":
            arch["code_signature"] = True
        elif cmd == "LC_MAIN" and main_offset is None:
            main_offset = number(f["entryoff"])
        elif cmd in ("LC_UNIXTHREAD", "LC_THREAD") and pc is None:
            m = PC.search(block)
            pc = int(m.group(1), 16) if m else None
    # dyld: LC_MAIN's offset is from the image's start, which __TEXT maps; else the thread's pc.
    text = next((s for s in arch["segments"] if s["name"] == "__TEXT"), None)
    if main_offset is not None:
        arch["entry_point"] = (text["vmaddr"] - text["fileoff"] + main_offset) if text else None
    else:
        arch["entry_point"] = pc if pc is not None else 0
    return arch


def slices(text):
    out = []
    for block in re.split(r"^architecture ", text, flags=re.M)[1:]:
        name = block.split("\n", 1)[0].strip()
        f = fields(block)
        out.append({"arch": name, "cpu": CPU.get(f["cputype"].replace("CPU_TYPE_", ""), "other"),
                    "offset": number(f["offset"]), "size": number(f["size"])})
    return out


def dump(path):
    # A sound universal header is printed even when a slice is not (that slice's own run
    # below says why); a header llvm refuses prints nothing.
    text, error = objdump("--universal-headers", path)
    if error and "Fat headers" not in text:
        return {"error": error}
    if "Fat headers" not in text:
        text, error = objdump("--private-headers", path)
        return {"error": error} if error else {"universal": False, "architectures": [image(text)]}
    fat = slices(text)
    architectures = []
    for s in fat:
        text, error = objdump("--private-headers", f"--arch={s['arch']}", path)
        architectures.append({"error": error} if error else image(text))
    return {"universal": True,
            "slices": [{k: s[k] for k in ("cpu", "offset", "size")} for s in fat],
            "architectures": architectures}


def main():
    root = sys.argv[1]
    names = sorted(n for n in os.listdir(root) if n.endswith(".macho"))
    out = {n: dump(os.path.join(root, n)) for n in names}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
