#!/usr/bin/env python3
"""Prints, as one JSON object keyed by file name, what binutils' readelf reads from each ELF in a
directory — the fields elf_info reports too (crates/maljan-analysis/tests/elf_parity.rs compares
them): entry point, segments, interpreter, needed libraries, soname, and the dynamic symbols
(imported: undefined; exported: defined global or weak functions and objects), read with -D
(from the dynamic segment, as ld.so does) so lying section headers do not matter.

Usage: readelf_dump.py DIR   (stdlib only; needs readelf on PATH)
"""

import json
import os
import re
import subprocess
import sys

SEGMENT = re.compile(
    r"^\s+(\S+)\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x([0-9a-f]+) 0x([0-9a-f]+) (.{3}) 0x[0-9a-f]+$"
)
SYMBOL = re.compile(r"^\s*\d+: [0-9a-f]+\s+\d+ (\S+)\s+(\S+)\s+\S+\s+(\S+) ?(.*)$")


def readelf(path, *args):
    out = subprocess.run(["readelf", "-W", *args, path], capture_output=True, text=True)
    return out.stdout


def rwx(flg):
    return ("r" if "R" in flg else "-") + ("w" if "W" in flg else "-") + ("x" if "E" in flg else "-")


def dump(path):
    header = readelf(path, "-h")
    entry = re.search(r"Entry point address:\s+0x([0-9a-f]+)", header)
    segments, interpreter = [], None
    for line in readelf(path, "-l").splitlines():
        m = SEGMENT.match(line)
        if m:
            typ, off, vaddr, filesz, memsz, flg = m.groups()
            segments.append({"type": typ, "offset": int(off, 16), "vaddr": int(vaddr, 16),
                             "file_size": int(filesz, 16), "mem_size": int(memsz, 16),
                             "flags": rwx(flg)})
        m = re.search(r"\[Requesting program interpreter: (.*)\]", line)
        if m:
            interpreter = m.group(1)
    dynamic = readelf(path, "-d", "-D")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dynamic)
    soname = re.search(r"\(SONAME\)\s+Library soname: \[(.*)\]", dynamic)
    imported, exported = [], []
    for line in readelf(path, "--syms", "-D").splitlines():
        m = SYMBOL.match(line)
        if not m:
            continue
        typ, bind, ndx, name = m.groups()
        name = name.split("@")[0].strip()
        if not name:
            continue
        if ndx == "UND":
            imported.append(name)
        elif bind != "LOCAL" and typ in ("FUNC", "OBJECT"):
            exported.append(name)
    return {
        "entry_point": int(entry.group(1), 16) if entry else None,
        "segments": segments,
        "interpreter": interpreter,
        "needed": needed,
        "soname": soname.group(1) if soname else None,
        "imported_symbols": sorted(imported),
        "exported_symbols": sorted(exported),
    }


def main():
    root = sys.argv[1]
    out = {n: dump(os.path.join(root, n)) for n in sorted(os.listdir(root))}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
