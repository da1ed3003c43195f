#!/usr/bin/env python3
"""Builds the crafted-ELF corpus elf_info is compared with binutils' readelf on
(crates/maljan-analysis/tests/elf_parity.rs): a seed ELF (a 64-bit little-endian program, e.g.
/bin/true), then the section-header lies that hide a program from tools reading sections —
no section headers, a table past the end of the file or cut by it, a huge count, a lying string
table index or entry size, sections whose offset or size lie, the .dynsym section pointing
nowhere, the whole table zeroed — alone and in every pair. The kernel and ld.so read only the
program headers, so every file still runs.

Usage: elf_corpus.py SEED OUTDIR   (writes OUTDIR/<tricks>.elf, prints how many; stdlib only)
"""

import itertools
import os
import struct
import sys


def sections(b):
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    out = []
    for i in range(shnum):
        at = shoff + i * shentsize
        name, typ, flags, addr, off, size = struct.unpack_from("<IIQQQQ", b, at)
        out.append({"at": at, "name": name, "type": typ, "off": off, "size": size})
    strtab = out[shstrndx]

    def name(s):
        start = strtab["off"] + s["name"]
        return bytes(b[start : b.index(b"\0", start)]).decode()

    for s in out:
        s["label"] = name(s)
    return out


def by_label(b, label):
    return next(s for s in sections(b) if s["label"] == label)


def no_sections(b):
    struct.pack_into("<Q", b, 0x28, 0)
    struct.pack_into("<HHH", b, 0x3A, 0x40, 0, 0)


def shoff_past_eof(b):
    struct.pack_into("<Q", b, 0x28, len(b) + 0x1000)


def shnum_huge(b):
    struct.pack_into("<H", b, 0x3C, 0xFFF0)


def shstrndx_lying(b):
    struct.pack_into("<H", b, 0x3E, 0x7FF0)


def shentsize_wrong(b):
    struct.pack_into("<H", b, 0x3A, 0x20)


def text_offset_past_eof(b):
    s = by_label(b, ".text")
    struct.pack_into("<Q", b, s["at"] + 0x18, len(b) + 0x10000)


def rodata_size_huge(b):
    s = by_label(b, ".rodata")
    struct.pack_into("<Q", b, s["at"] + 0x20, 0xFFFFFFFF0)


def dynsym_nowhere(b):
    s = by_label(b, ".dynsym")
    struct.pack_into("<Q", b, s["at"] + 0x18, len(b) + 0x20000)


def sections_zeroed(b):
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    b[shoff : shoff + shentsize * shnum] = bytes(shentsize * shnum)


# The table is cut last (it changes the file's length), so it is applied after the others.
def table_cut(b):
    shoff, = struct.unpack_from("<Q", b, 0x28)
    del b[shoff + 0x50 :]


TRICKS = {
    "no_sections": no_sections,
    "shoff_past_eof": shoff_past_eof,
    "shnum_huge": shnum_huge,
    "shstrndx_lying": shstrndx_lying,
    "shentsize_wrong": shentsize_wrong,
    "text_offset_past_eof": text_offset_past_eof,
    "rodata_size_huge": rodata_size_huge,
    "dynsym_nowhere": dynsym_nowhere,
    "sections_zeroed": sections_zeroed,
    "table_cut": table_cut,
}
# Tricks that read the section table must run before the ones that break it.
ORDER = ["text_offset_past_eof", "rodata_size_huge", "dynsym_nowhere", "sections_zeroed",
         "shstrndx_lying", "shentsize_wrong", "shnum_huge", "table_cut", "shoff_past_eof",
         "no_sections"]


def build(seed, tricks):
    b = bytearray(seed)
    for t in ORDER:
        if t in tricks:
            TRICKS[t](b)
    return bytes(b)


def main():
    seed = open(sys.argv[1], "rb").read()
    assert seed[:6] == b"\x7fELF\x02\x01", "the seed must be a 64-bit little-endian ELF"
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    files = {"plain": build(seed, [])}
    for t in TRICKS:
        files[t] = build(seed, [t])
    for a, c in itertools.combinations(TRICKS, 2):
        files[f"{a}+{c}"] = build(seed, [a, c])
    for name, data in files.items():
        with open(os.path.join(out, name + ".elf"), "wb") as fh:
            fh.write(data)
    print(len(files))


if __name__ == "__main__":
    main()
