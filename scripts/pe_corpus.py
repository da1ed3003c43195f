#!/usr/bin/env python3
"""Builds the crafted-PE corpus pe_info is compared with pefile on (crates/maljan-analysis/tests/
pe_parity.rs): one small program, then each layout trick malware and tiny-PE authors use alone and
in every compatible pair — unaligned raw pointers, raw sizes past the file or past the aligned
virtual size, sections that overlap or lie past the end, import and export tables in the headers
or past the sections, an import table reached only through the IAT, bound and delay imports, TLS
callbacks, NumberOfRvaAndSizes above 16 or below, a zero or huge section count, a short or cut
optional header — and the 544-byte PE of issue 42 (one section, PointerToRawData = 1).

Usage: pe_corpus.py OUTDIR   (writes OUTDIR/<tricks>.exe, prints how many; stdlib only)
"""

import itertools
import os
import struct
import sys


class Skip(Exception):
    """This combination of tricks cannot be built (they contradict each other)."""


class Region:
    """A run of bytes at a known RVA and file offset that tables are written into."""

    def __init__(self, rva, off, cap):
        self.rva, self.off, self.cap = rva, off, cap
        self.buf = bytearray()

    def put(self, data, align=4):
        self.buf += b"\0" * ((-len(self.buf)) % align)
        rva = self.rva + len(self.buf)
        self.buf += data
        if len(self.buf) > self.cap:
            raise Skip("region full")
        return rva

    def patch(self, rva, data):
        i = rva - self.rva
        self.buf[i : i + len(data)] = data


TRICKS = [
    "pe32plus",
    "unaligned_ptr",
    "unaligned_ptr_far",
    "raw_past_eof",
    "raw_past_aligned_virtual",
    "alias_section",
    "overlapping_virtual",
    "section_past_eof",
    "imports_in_header",
    "imports_in_overlay",
    "exports",
    "exports_in_header",
    "exports_in_overlay",
    "export_forwarders",
    "export_ordinal_only",
    "iat_only",
    "bound",
    "delay",
    "delay_old",
    "tls",
    "rva_count_big",
    "rva_count_huge",
    "rva_count_short",
    "short_optional",
    "no_sections",
    "huge_section_count",
    "ordinals",
    "dll_split",
    "low_alignment",
    "entry_outside",
    "overlay",
    "unsorted_sections",
    "zero_vsize",
]

# Pairs that contradict each other (the second would undo or forbid the first).
CONFLICTS = {
    frozenset(p)
    for p in [
        ("imports_in_header", "imports_in_overlay"),
        ("exports_in_header", "exports_in_overlay"),
        ("rva_count_big", "rva_count_huge"),
        ("rva_count_big", "rva_count_short"),
        ("rva_count_huge", "rva_count_short"),
        ("rva_count_big", "short_optional"),
        ("rva_count_huge", "short_optional"),
        ("bound", "iat_only"),
        ("delay_old", "pe32plus"),
        ("unaligned_ptr", "unaligned_ptr_far"),
        ("raw_past_eof", "raw_past_aligned_virtual"),
        ("raw_past_aligned_virtual", "alias_section"),
        ("raw_past_aligned_virtual", "section_past_eof"),
    ]
}
# Tricks that need sections (meaningless without them).
NEEDS_SECTIONS = {
    "unaligned_ptr", "unaligned_ptr_far", "raw_past_eof", "raw_past_aligned_virtual",
    "alias_section", "overlapping_virtual", "section_past_eof", "low_alignment",
    "unsorted_sections", "zero_vsize", "huge_section_count", "bound", "tls", "delay", "delay_old",
}


def build(tricks):
    t = set(tricks)
    for pair in itertools.combinations(sorted(t), 2):
        if frozenset(pair) in CONFLICTS:
            raise Skip("conflict")
    if "no_sections" in t and t & NEEDS_SECTIONS:
        raise Skip("needs sections")
    is64 = "pe32plus" in t
    base = 0x140000000 if is64 else 0x400000
    ptr_size = 8 if is64 else 4
    ord_flag = 1 << 63 if is64 else 1 << 31
    low = "low_alignment" in t
    sa, fa = (0x200, 0x200) if low else (0x1000, 0x200)
    # Directories written: 2 in a short optional header (the section table follows them).
    n_dirs = 2 if "short_optional" in t else 16
    declared_dirs = {"rva_count_big": 0x20, "rva_count_huge": 0xFFFFFFFF, "rva_count_short": 2}
    number_of_rva = next((declared_dirs[k] for k in declared_dirs if k in t), n_dirs)
    std_size = 112 if is64 else 96
    size_of_optional = std_size + 8 * n_dirs
    pe_at = 0x80
    table_at = pe_at + 24 + size_of_optional
    headers_end = 0x600

    # The sections: (name, va, vsize, ptr, raw, characteristics); regions where tables go.
    if "no_sections" in t:
        sections = []
        headers_end = 0x1000
        text = Region(0xF00, 0xF00, 0x100)
        rdata = data = None
    else:
        if low:
            layout = [(".text", 0x600, 0x100, 0x600, 0x200), (".rdata", 0x800, 0x600, 0x800, 0x600),
                      (".data", 0xE00, 0x100, 0xE00, 0x200)]
        else:
            layout = [(".text", 0x1000, 0x100, 0x600, 0x200), (".rdata", 0x2000, 0x600, 0x800, 0x600),
                      (".data", 0x3000, 0x100, 0xE00, 0x200)]
        chars = [0x60000020, 0x40000040, 0xC0000040]
        sections = [list(s) + [c] for s, c in zip(layout, chars)]
        text = Region(sections[0][1], sections[0][3], 0x100)
        rdata = Region(sections[1][1], sections[1][3], 0x600)
        data = Region(sections[2][1], sections[2][3], 0x100)
    ovl_at = 0x2000 if low else 0x6000
    ovl = Region(ovl_at, ovl_at, 0x800)
    n_sections = len(sections) + ("alias_section" in t) + ("section_past_eof" in t)
    # One empty section header after the table (a huge section count ends there), then tables.
    hdr_at = (table_at + 40 * (n_sections + 1) + 0x3F) & ~0x3F
    hdr_end = 0xF00 if "no_sections" in t else headers_end
    hdr = Region(hdr_at, hdr_at, hdr_end - hdr_at)
    where = {"rdata": rdata, "hdr": hdr, "ovl": ovl}
    dirs = [(0, 0)] * 16

    # Code: the entry point, two TLS callbacks and a delay-load stub.
    code = bytearray(0x40)
    code[0] = 0xC3
    code[0x10:0x13] = b"\xc2\x0c\x00"
    code[0x20:0x23] = b"\xc2\x0c\x00"
    code[0x30] = 0xC3
    text.put(bytes(code))
    entry = text.rva
    if "entry_outside" in t:
        entry = 0x9000

    def pointer(v):
        return struct.pack("<Q" if is64 else "<I", v)

    def hint_name(region, hint, name):
        return region.put(struct.pack("<H", hint) + name.encode() + b"\0", 2)

    # Imports.
    imp_region = where["hdr" if "imports_in_header" in t else "ovl" if "imports_in_overlay" in t else "rdata"]
    if imp_region is None:
        imp_region = hdr
    dlls = [("KERNEL32.dll", ["ExitProcess", "GetProcAddress", "LoadLibraryA"]), ("USER32.dll", ["MessageBoxA"])]
    if "ordinals" in t:
        dlls.append(("COMCTL32.dll", [17, 0x19]))
    if "dll_split" in t:
        dlls = [("KERNEL32.dll", ["ExitProcess"]), ("KERNEL32.dll", ["GetProcAddress", "LoadLibraryA"])] + dlls[1:]
    descriptors = []
    for k, (dll, funcs) in enumerate(dlls):
        name_rva = imp_region.put(dll.encode() + b"\0", 2)
        lookups = []
        for i, f in enumerate(funcs):
            lookups.append(ord_flag | f if isinstance(f, int) else hint_name(imp_region, i, f))
        oft = imp_region.put(b"".join(pointer(v) for v in lookups + [0]), ptr_size)
        bound_values = [0x7C800000 + 0x100 * k + 0x10 * i for i in range(len(funcs))]
        iat_values = bound_values if "bound" in t else lookups
        ft = imp_region.put(b"".join(pointer(v) for v in iat_values + [0]), ptr_size)
        if "iat_only" in t:
            oft = 0
        stamp, chain = (0xFFFFFFFF, 0xFFFFFFFF) if "bound" in t else (0, 0)
        descriptors.append(struct.pack("<5I", oft, stamp, chain, name_rva, ft))
    desc = imp_region.put(b"".join(descriptors) + b"\0" * 20, 4)
    dirs[1] = (desc, 20 * (len(descriptors) + 1))

    if "bound" in t:
        # The bound-import directory in the headers: entries, then names, offsets from its start.
        entries = [("KERNEL32.dll", ["NTDLL.DLL"]), ("USER32.dll", [])]
        size = 8 * (sum(1 + len(f) for _, f in entries) + 1)
        names = bytearray()
        offsets = {}
        for n in [e[0] for e in entries] + [f for e in entries for f in e[1]]:
            offsets[n] = size + len(names)
            names += n.encode() + b"\0"
        blob = bytearray()
        for n, fwd in entries:
            blob += struct.pack("<IHH", 0x4A5BC60F, offsets[n], len(fwd))
            for f in fwd:
                blob += struct.pack("<IHH", 0x4A5BC610, offsets[f], 0)
        blob += b"\0" * 8 + names
        dirs[11] = (hdr.put(bytes(blob), 4), len(blob))

    if "delay" in t or "delay_old" in t:
        old = "delay_old" in t
        va = (lambda r: r + base) if old else (lambda r: r)
        dll = rdata.put(b"WININET.dll\0", 2)
        funcs = ["InternetOpenA", "InternetOpenUrlA"]
        hn = [hint_name(rdata, i, f) for i, f in enumerate(funcs)]
        int_ = rdata.put(b"".join(pointer(va(v)) for v in hn) + pointer(0), ptr_size)
        iat = data.put(b"".join(pointer(base + text.rva + 0x30) for _ in funcs) + pointer(0), ptr_size)
        hmod = data.put(pointer(0), ptr_size)
        d = struct.pack("<8I", 0 if old else 1, va(dll), va(hmod), va(iat), va(int_), 0, 0, 0)
        dirs[13] = (rdata.put(d + b"\0" * 32, 4), 64)

    if "tls" in t:
        index = data.put(b"\0" * 4, 4)
        raw = data.put(b"TLS!" * 4, 4)
        callbacks = data.put(pointer(base + text.rva + 0x10) + pointer(base + text.rva + 0x20) + pointer(0), ptr_size)
        if "raw_past_aligned_virtual" in t:
            # The array lies in the last section's raw data past its aligned virtual size.
            callbacks = sections[2][1] + 0x1100
        fmt = "<4Q2I" if is64 else "<6I"
        tls = struct.pack(fmt, base + raw, base + raw + 16, base + index, base + callbacks, 0, 0)
        dirs[9] = (rdata.put(tls, 4), len(tls))

    if t & {"exports", "exports_in_header", "exports_in_overlay", "export_forwarders", "export_ordinal_only"}:
        region = where["hdr" if "exports_in_header" in t else "ovl" if "exports_in_overlay" in t else "rdata"] or hdr
        ordinal_only = "export_ordinal_only" in t
        names = [] if ordinal_only else ["Alpha", "Beta", "Gamma"]
        addresses = [text.rva, text.rva + 0x10, text.rva + 0x20, text.rva + 0x30]
        forwards = ["NTDLL.RtlAllocateHeap", "KERNEL32.#5"] if "export_forwarders" in t else []
        directory = region.put(b"\0" * 40, 4)
        fwd_rvas = [region.put(f.encode() + b"\0", 1) for f in forwards]
        functions = addresses + fwd_rvas
        if forwards and not ordinal_only:
            names += ["Forwarded", "ZForwardedByOrdinal"]
        names = sorted(names)
        name_rvas = [region.put(n.encode() + b"\0", 1) for n in names]
        dll_name = region.put(b"crafted.dll\0", 1)
        aof = region.put(b"".join(struct.pack("<I", a) for a in functions), 4)
        # Name i exports function i; the last address (index 3) is exported by ordinal only.
        order = [i for i in range(len(functions)) if i != 3][: len(names)]
        aon = region.put(b"".join(struct.pack("<I", r) for r in name_rvas), 4)
        aoo = region.put(b"".join(struct.pack("<H", i) for i in order), 2)
        end = region.rva + len(region.buf)
        region.patch(directory, struct.pack("<2I2H7I", 0, 0x5F000000, 0, 0, dll_name, 5,
                                            len(functions), len(names), aof, aon, aoo))
        dirs[0] = (directory, end - directory)

    # Section table tricks.
    if sections:
        if "unaligned_ptr" in t:
            sections[1][3] += 1
        if "unaligned_ptr_far" in t:
            sections[1][3] += 0x1FF
        if "zero_vsize" in t:
            sections[1][2] = 0
        if "raw_past_eof" in t:
            sections[2][4] = 0x10000
        if "raw_past_aligned_virtual" in t:
            sections[2][4] = 0x1200
        if "overlapping_virtual" in t:
            sections[1][2] = 0x1800
        if "alias_section" in t:
            # A second mapping of .rdata's raw data; the import directory is found through it.
            alias_va = 0x1000 if low else 0x4000
            sections.append([".alias", alias_va + (0x200 if low else 0), 0x600, sections[1][3], 0x600, 0x40000040])
            shift = sections[-1][1] - sections[1][1]
            if imp_region is rdata:
                dirs[1] = (dirs[1][0] + shift, dirs[1][1])
        if "section_past_eof" in t:
            sections.append([".ghost", 0x1600 if low else 0x5000, 0x200, 0x10000, 0x200, 0x40000040])
        if "unsorted_sections" in t:
            sections = sections[2:] + sections[:2]

    size_of_image = 0x2000 if low else 0x6000
    if "no_sections" in t:
        size_of_image = 0x1000

    # Assemble.
    regions = [r for r in (hdr, text, rdata, data, ovl) if r is not None and r.buf]
    size = headers_end
    for s in sections:
        if s[3] + s[4] <= 0x4000:
            size = max(size, (s[3] & ~0x1FF) + s[4])
    for r in regions:
        size = max(size, r.off + len(r.buf))
    if "raw_past_aligned_virtual" in t:
        size = max(size, sections_by_name(sections, ".data")[3] + 0x1200)
    f = bytearray(size)
    for r in regions:
        f[r.off : r.off + len(r.buf)] = r.buf
    if "raw_past_aligned_virtual" in t and "tls" in t:
        at = sections_by_name(sections, ".data")[3] + 0x1100
        f[at : at + 3 * ptr_size] = pointer(base + text.rva + 0x10) + pointer(base + text.rva + 0x20) + pointer(0)
    f[0:2] = b"MZ"
    f[0x3C:0x40] = struct.pack("<I", pe_at)
    f[pe_at : pe_at + 4] = b"PE\0\0"
    declared_sections = 0xFFFF if "huge_section_count" in t else len(sections)
    characteristics = 0x0102 | (0x20 if is64 else 0)
    f[pe_at + 4 : pe_at + 24] = struct.pack("<HHIIIHH", 0x8664 if is64 else 0x14C, declared_sections,
                                            0x5F000000, 0, 0, size_of_optional, characteristics)
    o = pe_at + 24
    if is64:
        opt = struct.pack("<HBBIIIII", 0x20B, 14, 0, 0x200, 0x800, 0, entry, 0x1000)
        opt += struct.pack("<QII", base, sa, fa)
    else:
        opt = struct.pack("<HBBIIIIII", 0x10B, 14, 0, 0x200, 0x800, 0, entry, 0x1000, 0x2000)
        opt += struct.pack("<III", base, sa, fa)
    opt += struct.pack("<6H4I2H", 6, 0, 0, 0, 6, 0, 0, size_of_image, headers_end, 0, 2, 0x8140)
    sizes = (0x100000, 0x1000, 0x100000, 0x1000)
    opt += struct.pack("<4Q" if is64 else "<4I", *sizes)
    opt += struct.pack("<II", 0, number_of_rva)
    assert len(opt) == std_size
    for rva, sz in dirs[:n_dirs]:
        opt += struct.pack("<II", rva, sz)
    f[o : o + len(opt)] = opt
    for i, (name, va, vsize, ptr, raw, ch) in enumerate(sections):
        at = table_at + 40 * i
        f[at : at + 40] = struct.pack("<8sIIIIIIHHI", name.encode(), vsize, va, raw, ptr, 0, 0, 0, 0, ch)
    if "overlay" in t:
        f += b"OVERLAY!" * 96
    return bytes(f)


def sections_by_name(sections, name):
    return next(s for s in sections if s[0] == name)


def truncated_optional():
    """A PE whose file ends 100 bytes into its optional header (no section table fits)."""
    f = bytearray(0x80 + 24 + 100)
    f[0:2] = b"MZ"
    f[0x3C:0x40] = struct.pack("<I", 0x80)
    f[0x80:0x84] = b"PE\0\0"
    f[0x84:0x98] = struct.pack("<HHIIIHH", 0x14C, 0, 0x5F000000, 0, 0, 0xE0, 0x0102)
    opt = struct.pack("<HBBIIIIII", 0x10B, 14, 0, 0, 0, 0, 0x60, 0, 0)
    opt += struct.pack("<III", 0x400000, 0x1000, 0x200)
    opt += struct.pack("<6H4I2H", 6, 0, 0, 0, 6, 0, 0, 0x1000, 0x200, 0, 2, 0)
    f[0x98 : 0x98 + len(opt)] = opt[:100]
    return bytes(f)


def issue_42_tiny():
    """The 544-byte PE of issue 42: FileAlignment 0x200, one section at RVA 0x1000 whose
    PointerToRawData is 1 (the loader reads it from offset 0, so RVA 0x1000 + x is offset x),
    importing KERNEL32.DLL!ExitProcess and USER32.DLL!MessageBoxA."""
    f = bytearray(0x220)
    f[0:2] = b"MZ"
    f[0x3C:0x40] = struct.pack("<I", 0x40)
    f[0x40:0x44] = b"PE\0\0"
    f[0x44:0x58] = struct.pack("<HHIIIHH", 0x14C, 1, 0, 0, 0, 0xE0, 0x0102)
    rva = lambda off: 0x1000 + off
    opt = struct.pack("<HBBIIIIII", 0x10B, 0, 0, 0x220, 0, 0, rva(0x1F0), 0, 0)
    opt += struct.pack("<III", 0x400000, 0x1000, 0x200)
    opt += struct.pack("<6H4I2H", 4, 0, 0, 0, 4, 0, 0, 0x2000, 0x200, 0, 2, 0)
    opt += struct.pack("<4I", 0x100000, 0x1000, 0x100000, 0x1000)
    opt += struct.pack("<II", 0, 16)
    dirs = [(0, 0)] * 16
    dirs[1] = (rva(0x160), 60)
    for d in dirs:
        opt += struct.pack("<II", *d)
    f[0x58 : 0x58 + len(opt)] = opt
    f[0x138:0x160] = struct.pack("<8sIIIIIIHHI", b".text", 0x220, 0x1000, 0x21F, 1, 0, 0, 0, 0, 0xE0000020)
    # Descriptors at 0x160 (two and a terminator), IATs at 0x19C / 0x1A4, names after.
    f[0x19C:0x1A0] = struct.pack("<I", rva(0x1AC))
    f[0x1A4:0x1A8] = struct.pack("<I", rva(0x1BA))
    f[0x1AC:0x1BA] = b"\0\0ExitProcess\0"
    f[0x1BA:0x1C8] = b"\0\0MessageBoxA\0"
    f[0x1C8:0x1D5] = b"KERNEL32.DLL\0"
    f[0x1D6:0x1E1] = b"USER32.DLL\0"
    f[0x160:0x174] = struct.pack("<5I", 0, 0, 0, rva(0x1C8), rva(0x19C))
    f[0x174:0x188] = struct.pack("<5I", 0, 0, 0, rva(0x1D6), rva(0x1A4))
    # push 0; push 0; push 0; push 0; call [MessageBoxA]; push 0; call [ExitProcess]
    f[0x1F0:0x20A] = bytes([0x6A, 0, 0x6A, 0, 0x6A, 0, 0x6A, 0, 0xFF, 0x15]) + struct.pack("<I", 0x400000 + rva(0x1A4)) \
        + bytes([0x6A, 0, 0xFF, 0x15]) + struct.pack("<I", 0x400000 + rva(0x19C)) + b"\xc3" * 4
    return bytes(f)


def corpus():
    yield "plain", build([])
    for trick in TRICKS:
        try:
            yield trick, build([trick])
        except Skip:
            pass
    for a, b in itertools.combinations(TRICKS, 2):
        try:
            yield f"{a}+{b}", build([a, b])
        except Skip:
            pass
    yield "truncated_optional", truncated_optional()
    yield "issue42_tiny", issue_42_tiny()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for name, data in corpus():
        with open(os.path.join(out, name + ".exe"), "wb") as fh:
            fh.write(data)
        n += 1
    print(n)


if __name__ == "__main__":
    main()
