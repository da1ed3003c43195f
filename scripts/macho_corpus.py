#!/usr/bin/env python3
"""Builds the crafted Mach-O corpus macho_info is compared with LLVM's llvm-objdump on
(crates/maljan-analysis/tests/macho_parity.rs): one small x86-64 program written from scratch
(__PAGEZERO, __TEXT with __text and __cstring, __DATA, __LINKEDIT, LC_SYMTAB with three symbols,
LC_LOAD_DYLINKER, LC_UUID, LC_MAIN, LC_LOAD_DYLIB libSystem), then each variation alone and in
every pair: the other shapes (32-bit i386, arm64, a dylib, universal with two slices, with a
32- or 64-bit fat header), the other entry point (LC_UNIXTHREAD), the other load commands
(LC_LOAD_WEAK_DYLIB with LC_RPATH, LC_CODE_SIGNATURE), and the tricks that hide a program from
parsers: load commands cut by the end of the file, a command whose cmdsize lies (past the
commands, below its structure, zero), a huge or zero ncmds, sizeofcmds past the file, a
segment, a section or the symbol table past the end of the file, a segment claiming more
sections than its command holds, a dylib name outside its command, a universal slice past the
end. In a universal file the tricks hit the first slice; the second stays sound.

Usage: macho_corpus.py OUTDIR   (writes OUTDIR/<variations>.macho, prints how many; stdlib only)
"""

import itertools
import os
import struct
import sys

CPU = {"x86_64": (0x01000007, 3), "arm64": (0x0100000C, 0), "i386": (7, 3)}
LC_SEGMENT, LC_SEGMENT_64, LC_SYMTAB, LC_UNIXTHREAD = 0x1, 0x19, 0x2, 0x5
LC_LOAD_DYLIB, LC_ID_DYLIB, LC_LOAD_DYLINKER, LC_UUID = 0xC, 0xD, 0xE, 0x1B
LC_LOAD_WEAK_DYLIB, LC_RPATH, LC_MAIN, LC_CODE_SIGNATURE = 0x80000018, 0x8000001C, 0x80000028, 0x1D


def pad8(b):
    return b + b"\0" * ((-len(b)) % 8)


def str_cmd(cmd, head, text):
    """A command of `head` bytes after cmd/cmdsize, its string at its end, padded to 8 bytes."""
    name = text.encode() + b"\0"
    name += b"\0" * ((-(8 + len(head) + len(name))) % 8)
    return struct.pack("<II", cmd, 8 + len(head) + len(name)) + head + name


def name16(s):
    return s.encode().ljust(16, b"\0")


def build(arch, v):
    """A thin Mach-O for `arch` with the structural variations in `v`; returns (bytes, places):
    places maps a command's label to its offset in the file, for the byte tricks."""
    is64 = arch != "i386"
    cputype, subtype = CPU[arch]
    base = 0x100000000 if is64 else 0x1000
    hdr_size = 32 if is64 else 28
    word = "Q" if is64 else "I"
    text_off, data_off, link_off = 0x800, 0x1000, 0x1100
    code = bytes.fromhex("554889e531c05dc3") * 4
    cstring = b"hello, world\0\0\0\0"
    dylib = "dylib" in v
    cmds = []  # (label, bytes)

    def segment(name, vmaddr, vmsize, fileoff, filesize, prot, sections):
        body = bytearray()
        for sect, off, size, flags in sections:
            addr = vmaddr + (off - fileoff)
            if is64:
                body += struct.pack("<16s16sQQIIIIIIII", name16(sect), name16(name), addr, size,
                                    off, 4, 0, 0, flags, 0, 0, 0)
            else:
                body += struct.pack("<16s16sIIIIIIIII", name16(sect), name16(name), addr, size,
                                    off, 4, 0, 0, flags, 0, 0)
        cmd = LC_SEGMENT_64 if is64 else LC_SEGMENT
        head = struct.pack(f"<II16s{word}{word}{word}{word}IIII", cmd,
                           (72 if is64 else 56) + len(body), name16(name), vmaddr, vmsize,
                           fileoff, filesize, prot, prot, len(sections), 0)
        return bytes(head + body)

    if not dylib:
        cmds.append(("pagezero", segment("__PAGEZERO", 0, base, 0, 0, 0, [])))
    cmds.append(("text", segment("__TEXT", base, 0x1000, 0, 0x1000, 5, [
        ("__text", text_off, len(code), 0x80000400),
        ("__cstring", text_off + len(code), len(cstring), 2)])))
    cmds.append(("data", segment("__DATA", base + 0x1000, 0x1000, data_off, 0x100, 3, [
        ("__data", data_off, 0x40, 0)])))
    # __LINKEDIT: the symbol table, its strings, then the code signature.
    strtab = b"\0_main\0__mh_execute_header\0dyld_stub_binder\0"
    strtab = pad8(strtab)
    nlist = (lambda *f: struct.pack("<IBBHQ", *f)) if is64 else (lambda *f: struct.pack("<IBBhI", *f))
    syms = (nlist(1, 0x0F, 1, 0, base + text_off) + nlist(7, 0x0F, 1, 0x10, base)
            + nlist(27, 0x01, 0, 0x100, 0))
    symoff, stroff = link_off, link_off + len(syms)
    sig_off = stroff + len(strtab)
    sig_off += (-sig_off) % 16
    signature = struct.pack(">III", 0xFADE0CC0, 0x40, 0) + bytes(0x40 - 12)
    link = bytearray(bytes(sig_off + len(signature) - link_off))
    link[0 : len(syms)] = syms
    link[stroff - link_off : stroff - link_off + len(strtab)] = strtab
    if "code_signature" in v:
        link[sig_off - link_off :] = signature
    else:
        del link[sig_off - link_off :]
    cmds.append(("linkedit", segment("__LINKEDIT", base + 0x2000, 0x1000, link_off, len(link), 1, [])))
    cmds.append(("symtab", struct.pack("<IIIIII", LC_SYMTAB, 24, symoff, 3, stroff, len(strtab))))
    if not dylib:
        cmds.append(("dylinker", str_cmd(LC_LOAD_DYLINKER, struct.pack("<I", 12), "/usr/lib/dyld")))
    else:
        cmds.append(("id", str_cmd(LC_ID_DYLIB, struct.pack("<IIII", 24, 2, 0x10000, 0x10000),
                                   "@rpath/libcrafted.dylib")))
    cmds.append(("uuid", struct.pack("<II", LC_UUID, 24) + bytes(range(0x10, 0x20))))
    entry = text_off
    if "unixthread" in v:
        if arch == "x86_64":
            regs = [0] * 21
            regs[16] = base + entry
            state = struct.pack("<II", 4, 42) + struct.pack("<21Q", *regs)
        elif arch == "arm64":
            regs = [0] * 33
            regs[32] = base + entry
            state = struct.pack("<II", 6, 68) + struct.pack("<33QII", *regs, 0, 0)
        else:
            regs = [0] * 16
            regs[10] = base + entry
            state = struct.pack("<II", 1, 16) + struct.pack("<16I", *regs)
        cmds.append(("entry", struct.pack("<II", LC_UNIXTHREAD, 8 + len(state)) + state))
    elif not dylib:
        cmds.append(("entry", struct.pack("<IIQQ", LC_MAIN, 24, entry, 0)))

    def dylib_cmd(cmd, path):
        return str_cmd(cmd, struct.pack("<IIII", 24, 2, 0x05000000, 0x10000), path)

    cmds.append(("libsystem", dylib_cmd(LC_LOAD_DYLIB, "/usr/lib/libSystem.B.dylib")))
    if "weak_dylib" in v:
        cmds.append(("weak", dylib_cmd(LC_LOAD_WEAK_DYLIB, "@rpath/libhijack.dylib")))
        cmds.append(("rpath", str_cmd(LC_RPATH, struct.pack("<I", 12), "@executable_path/../Frameworks")))
    if "code_signature" in v:
        cmds.append(("signature", struct.pack("<IIII", 0x1D, 16, sig_off, len(signature))))

    places, at = {}, hdr_size
    for label, c in cmds:
        places[label] = at
        at += len(c)
    sizeofcmds = at - hdr_size
    assert at <= text_off, "the load commands overlap __text"
    magic = 0xFEEDFACF if is64 else 0xFEEDFACE
    filetype, flags = (6, 0x100085) if dylib else (2, 0x200085)
    out = bytearray(struct.pack("<IIIIIII", magic, cputype, subtype, filetype, len(cmds), sizeofcmds, flags))
    if is64:
        out += b"\0\0\0\0"
    for _, c in cmds:
        out += c
    out += bytes(text_off - len(out))
    out += code + cstring
    out += bytes(data_off - len(out))
    out += b"\x2a" * 0x100
    out += link
    places["header"] = 0
    places["is64"] = is64
    return out, places


def seg_field(p, label, field):
    """The offset of a field of the segment command `label` (fileoff, nsects, …)."""
    is64 = p["is64"]
    offs = {"fileoff": 40 if is64 else 32, "filesize": 48 if is64 else 36,
            "nsects": 64 if is64 else 48, "first_section_offset": (72 + 48) if is64 else (56 + 40)}
    return p[label] + offs[field]


# Byte tricks: each lies in one place; they run in this order (the cut last).
def cmdsize_huge(b, p):
    struct.pack_into("<I", b, p["uuid"] + 4, 0x10000)


def cmdsize_small(b, p):
    struct.pack_into("<I", b, p["uuid"] + 4, 8)


def cmdsize_zero(b, p):
    struct.pack_into("<I", b, p["uuid"] + 4, 0)


def ncmds_huge(b, p):
    struct.pack_into("<I", b, 16, 0xFFFFFFF0)


def ncmds_zero(b, p):
    struct.pack_into("<I", b, 16, 0)


def sizeofcmds_huge(b, p):
    struct.pack_into("<I", b, 20, 0x7FFFFFF0)


def segment_past_eof(b, p):
    struct.pack_into("<I", b, seg_field(p, "data", "fileoff"), 0x100000)


def section_past_eof(b, p):
    struct.pack_into("<I", b, seg_field(p, "text", "first_section_offset"), 0x200000)


def symtab_past_eof(b, p):
    struct.pack_into("<I", b, p["symtab"] + 8, 0x300000)


def nsects_lying(b, p):
    struct.pack_into("<I", b, seg_field(p, "text", "nsects"), 0x7FFFFFFF)


def dylib_name_outside(b, p):
    struct.pack_into("<I", b, p["libsystem"] + 8, 0x400)


def cmds_truncated(b, p):
    del b[p["uuid"] + 12 :]


BYTE_TRICKS = {
    "cmdsize_huge": cmdsize_huge,
    "cmdsize_small": cmdsize_small,
    "cmdsize_zero": cmdsize_zero,
    "ncmds_huge": ncmds_huge,
    "ncmds_zero": ncmds_zero,
    "sizeofcmds_huge": sizeofcmds_huge,
    "segment_past_eof": segment_past_eof,
    "section_past_eof": section_past_eof,
    "symtab_past_eof": symtab_past_eof,
    "nsects_lying": nsects_lying,
    "dylib_name_outside": dylib_name_outside,
    "cmds_truncated": cmds_truncated,
}
SHAPES = ["i386", "arm64", "dylib", "fat", "fat64", "fat_slice_past_eof"]
FEATURES = ["unixthread", "weak_dylib", "code_signature"]
VARIATIONS = SHAPES + FEATURES + list(BYTE_TRICKS)
# Pairs that cannot both hold: one architecture per slice, one fat header.
EXCLUSIVE = [{"i386", "arm64"}, {"fat", "fat64"}, {"fat", "fat_slice_past_eof"},
             {"fat64", "fat_slice_past_eof"}, {"ncmds_huge", "ncmds_zero"},
             {"cmdsize_huge", "cmdsize_small"}, {"cmdsize_huge", "cmdsize_zero"},
             {"cmdsize_small", "cmdsize_zero"}]


def thin(arch, v):
    b, p = build(arch, v)
    for name, trick in BYTE_TRICKS.items():
        if name in v:
            trick(b, p)
    return bytes(b)


def fat(slices, wide, past_eof):
    """A universal file: each (arch, bytes) slice at a 4 KiB boundary."""
    count = len(slices)
    entry = 32 if wide else 20
    at = 0x1000
    table, body = bytearray(), bytearray()
    for i, (arch, data) in enumerate(slices):
        cputype, subtype = CPU[arch]
        size = len(data) + (0x100000 if past_eof and i == count - 1 else 0)
        if wide:
            table += struct.pack(">IIQQII", cputype, subtype, at, size, 12, 0)
        else:
            table += struct.pack(">IIIII", cputype, subtype, at, size, 12)
        body += bytes(at - 0x1000 - len(body)) + data
        at += len(data) + ((-len(data)) % 0x1000)
    head = struct.pack(">II", 0xCAFEBABF if wide else 0xCAFEBABE, count) + table
    return head + bytes(0x1000 - len(head)) + body


def make(v):
    arch = "i386" if "i386" in v else "arm64" if "arm64" in v else "x86_64"
    first = thin(arch, v)
    if not {"fat", "fat64", "fat_slice_past_eof"} & set(v):
        return first
    partner = "arm64" if arch != "arm64" else "x86_64"
    sound = [x for x in v if x in FEATURES or x == "dylib"]
    return fat([(arch, first), (partner, thin(partner, sound))], "fat64" in v,
               "fat_slice_past_eof" in v)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = {"plain": make([])}
    for v in VARIATIONS:
        files[v] = make([v])
    for a, c in itertools.combinations(VARIATIONS, 2):
        if {a, c} in EXCLUSIVE:
            continue
        files[f"{a}+{c}"] = make([a, c])
    for name, data in files.items():
        with open(os.path.join(out, name + ".macho"), "wb") as fh:
            fh.write(data)
    print(len(files))


if __name__ == "__main__":
    main()
