#!/usr/bin/env python3
"""The packer corpus detect_packer is compared with Detect It Easy on (issue 42 item 4).

Build mode (scripts/peers.sh runs it; stdlib only): small C programs of our own compiled with
mingw-w64 (i686 and x86_64, -O2/-Os, EXEs and a DLL), then packed with every packer the package
registries give us -- UPX from Debian at several levels and with --lzma/--brute/--ultra-brute, NSIS
installers from Debian's makensis (zlib, bzip2, lzma, solid, x86 and amd64 stubs), Go programs from
Debian's golang (GOOS=windows, 386 and amd64, stripped and not, and UPX-packed). Rust has no
Windows target installed here and PyInstaller only builds for the host, so neither is built; the
die-python wheel carries signatures but no test files. The PE files of the labelled corpora
(scripts/corpus.sh: mingw, mingw-upx, nsis, nsis-installers, wine, pypi, malicious exe/upx) are
listed too, by path. Written once into $MALJAN_PEERS/packer-corpus (stamped with this script's
hash); prints `export MALJAN_PACKER_CORPUS=...`.

DIE mode (`$MALJAN_PY scripts/packer_corpus.py --die`, the peers venv with die-python): reads
paths on stdin, prints one JSON line per file: DIE's own strings and the families they name, in
detect_packer's names (`Packer: UPX(4.22)[NRV,brute]` -> `UPX`). The test
(crates/maljan-analysis/tests/packers_agree_with_die.rs) and the bench (bench/analysis_packers.py)
both ask DIE through it, so the mapping lives in one place.
"""
import hashlib, json, os, re, shutil, subprocess, sys
from pathlib import Path

# DIE's result types that name what made the file (Linker, Sign tool, Overlay, Emulator,
# Format, Library… describe something else).
NAMING_TYPES = {"Packer", "Protector", "Installer", "Compiler", "Cryptor", "Protection", "SFX",
                "Obfuscator", "Joiner", "Player", "(Heur)Packer", "(Heur)Protection"}

# DIE's family names -> detect_packer's (a regex on DIE's name, the first match wins).
FAMILIES = [
    (r"^UPX", "UPX"),
    (r"^Nullsoft Scriptable Install System|^NSIS", "NSIS"),
    (r"^Inno Setup", "Inno Setup"),
    (r"^InstallShield", "InstallShield"),
    (r"^ASPack", "ASPack"),
    (r"^FSG", "FSG"),
    (r"^MEW", "MEW"),
    (r"^\(?Win\)?Upack|^Upack", "Upack"),
    (r"^PECompact", "PECompact"),
    (r"^Petite", "Petite"),
    (r"^WWPack32", "WWPack32"),
    (r"^yoda'?s Crypter", "yoda's Crypter"),
    (r"^yoda'?s Protector", "yoda's Protector"),
    (r"^PESpin", "PESpin"),
    (r"^MPRESS", "MPRESS"),
    (r"^(Themida|WinLicense)", "Themida/WinLicense"),
    (r"^VMProtect", "VMProtect"),
    (r"^(The )?Enigma", "Enigma Protector"),
    (r"^Obsidium", "Obsidium"),
    (r"^ConfuserEx|^Confuser", "ConfuserEx"),
    (r"^\.NET Reactor", ".NET Reactor"),
    (r"^PyInstaller", "PyInstaller"),
    (r"^Nuitka", "Nuitka"),
    (r"^AutoIt", "AutoIt"),
    (r"^Go\b|^Golang", "Go"),
    (r"^Rust", "Rust"),
    (r"Delphi", "Delphi"),
    (r"^MinGW", "MinGW GCC"),
    (r"^GCC|^GNU C", "GCC"),
    (r"^Microsoft Visual C", "Microsoft Visual C/C++"),
    (r"^WiX|^Burn", "WiX Burn"),
]


def family(die_name: str) -> str:
    for pat, name in FAMILIES:
        if re.search(pat, die_name, re.I):
            return name
    return die_name


def die_mode() -> None:
    import die  # the peers venv

    flags = die.ScanFlags.RESULT_AS_JSON | die.ScanFlags.DEEP_SCAN
    for line in sys.stdin:
        path = line.rstrip("\n")
        if not path:
            continue
        out = json.loads(die.scan_file(path, flags, str(die.database_path)) or "{}")
        values = [v for d in out.get("detects", []) for v in d.get("values", [])]
        strings = [v["string"] for v in values if v.get("name") != "Unknown"]
        families = sorted({family(v["name"]) for v in values if v.get("type") in NAMING_TYPES})
        print(json.dumps({"path": path, "die": strings, "families": families}), flush=True)


PROGRAMS = {
    "hello_box": r'''#include <windows.h>
int WINAPI WinMain(HINSTANCE h, HINSTANCE p, LPSTR c, int n) {
  MessageBoxA(NULL, "Hello from the packer corpus", "hello", MB_OK); return 0; }''',
    "file_sum": r'''#include <stdio.h>
int main(int argc, char **argv) { unsigned long s = 0; int c; FILE *f;
  if (argc < 2 || !(f = fopen(argv[1], "rb"))) { puts("usage: file_sum FILE"); return 1; }
  while ((c = fgetc(f)) != EOF) s = s * 31 + (unsigned)c; fclose(f); printf("%08lx\n", s); return 0; }''',
    "env_dump": r'''#include <windows.h>
#include <stdio.h>
int main(void) { char buf[256]; DWORD n = sizeof buf;
  if (GetComputerNameA(buf, &n)) printf("host %s\n", buf);
  GetSystemDirectoryA(buf, sizeof buf); printf("system %s\n", buf);
  printf("ticks %lu\n", GetTickCount()); return 0; }''',
    "primes": r'''#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) { int n = argc > 1 ? atoi(argv[1]) : 1000, k = 0;
  char *sieve = calloc(n + 1, 1); for (int i = 2; i <= n; i++) if (!sieve[i]) { k++;
  for (int j = 2 * i; j <= n; j += i) sieve[j] = 1; } printf("%d primes\n", k); free(sieve); return 0; }''',
}
DLL = r'''#include <windows.h>
__declspec(dllexport) int add(int a, int b) { return a + b; }
BOOL WINAPI DllMain(HINSTANCE h, DWORD r, LPVOID p) { return TRUE; }'''
GO_PROGRAM = '''package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Println("hello from the packer corpus:", strings.Join(os.Args[1:], " "))
}
'''
NSIS_SCRIPT = '''Unicode {unicode}
{target}
SetCompressor {compressor}
Name "{name}"
OutFile "{out}"
InstallDir "$PROGRAMFILES\\{name}"
RequestExecutionLevel user
Page directory
Page instfiles
Section "Main"
  SetOutPath "$INSTDIR"
  File "{exe}"
  WriteUninstaller "$INSTDIR\\uninstall.exe"
SectionEnd
Section "Uninstall"
  Delete "$INSTDIR\\uninstall.exe"
  RMDir "$INSTDIR"
SectionEnd
'''
GCC = {"x86": "i686-w64-mingw32-gcc", "x64": "x86_64-w64-mingw32-gcc"}
UPX_OPTIONS = {"upx1": ["-1"], "upx9": ["-9"], "upxbest": ["--best"], "upxlzma": ["--lzma"],
               "upxbrute": ["--brute"], "upxultra": ["--ultra-brute"]}


def run(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)


def build(peers: Path, corpus: Path, out: Path) -> None:
    files = out / "files"
    scratch = out / "scratch"
    for d in ("mingw", "upx", "nsis", "go"):
        (files / d).mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    manifest = []

    def add(path: Path, group: str, made_with: str) -> None:
        manifest.append({"path": str(path), "group": group, "made_with": made_with})

    upx = corpus / "tools/upx/usr/bin/upx-ucl"
    plain = []
    for name, src in PROGRAMS.items():
        c = scratch / f"{name}.c"
        c.write_text(src)
        for arch, gcc in GCC.items():
            for opt in ("O2", "Os"):
                exe = files / "mingw" / f"{name}-{arch}-{opt.lower()}.exe"
                gui = ["-mwindows"] if name == "hello_box" else []
                run([gcc, f"-{opt}", "-s", *gui, "-o", str(exe), str(c)])
                add(exe, "mingw", f"mingw-w64 gcc {arch} -{opt}")
                plain.append(exe)
    dll_c = scratch / "adder.c"
    dll_c.write_text(DLL)
    for arch, gcc in GCC.items():
        dll = files / "mingw" / f"adder-{arch}.dll"
        run([gcc, "-O2", "-s", "-shared", "-o", str(dll), str(dll_c)])
        add(dll, "mingw", f"mingw-w64 gcc {arch} DLL")
        plain.append(dll)

    # UPX: every level on every program would be slow (--ultra-brute is minutes); each option on a
    # rotating share, so each program and each option appear several times.
    for i, src in enumerate(plain):
        chosen = ["upx1", "upx9", "upxlzma"] + [["upxbest", "upxbrute", "upxultra"][i % 3]]
        for tag in chosen:
            dest = files / "upx" / f"{src.stem}-{tag}{src.suffix}"
            run([str(upx), "-q", "-f", *UPX_OPTIONS[tag], "-o", str(dest), str(src)], stderr=subprocess.DEVNULL)
            add(dest, "upx", f"UPX {' '.join(UPX_OPTIONS[tag])}")

    # NSIS: Debian's makensis, run from the unpacked packages of scripts/corpus.sh.
    env = dict(os.environ, NSISDIR=str(corpus / "tools/nsis-common/usr/share/nsis"))
    makensis = corpus / "tools/nsis/usr/bin/makensis"
    compressors = ["zlib", "bzip2", "lzma", "/SOLID zlib", "/SOLID lzma", "/SOLID bzip2"]
    targets = [("true", ""), ("false", ""), ("true", "Target amd64-unicode")]
    exes = [p for p in plain if p.suffix == ".exe"]
    for i, compressor in enumerate(compressors):
        for j, (unicode, target) in enumerate(targets):
            exe = exes[(i * len(targets) + j) % len(exes)]
            os.utime(exe, (1_772_443_800, 1_772_443_800))
            tag = compressor.replace("/SOLID ", "solid-") + ("-amd64" if target else "") + ("" if unicode == "true" else "-ansi")
            dest = files / "nsis" / f"{exe.stem}-{tag}-setup.exe"
            script = scratch / f"{dest.stem}.nsi"
            script.write_text(NSIS_SCRIPT.format(unicode=unicode, target=target, compressor=compressor,
                                                 name=exe.stem, out=dest, exe=exe))
            run([str(makensis), "-V1", "-NOCD", str(script)], env=env)
            add(dest, "nsis", f"makensis {compressor} {target or 'x86'} unicode={unicode}")

    # Go: Debian's golang cross-compiles for Windows out of the box.
    go = shutil.which("go")
    if go:
        gosrc = scratch / "gohello"
        gosrc.mkdir(exist_ok=True)
        (gosrc / "main.go").write_text(GO_PROGRAM)
        (gosrc / "go.mod").write_text("module gohello\n\ngo 1.19\n")
        for arch in ("386", "amd64"):
            for strip, flags in (("", []), ("-stripped", ["-ldflags=-s -w"])):
                dest = files / "go" / f"gohello-{arch}{strip}.exe"
                genv = dict(os.environ, GOOS="windows", GOARCH=arch, CGO_ENABLED="0",
                            GOCACHE=str(scratch / "gocache"), GOFLAGS="-trimpath")
                run([go, "build", *flags, "-o", str(dest), "."], cwd=gosrc, env=genv)
                add(dest, "go", f"go {arch}{strip}")
                if strip:
                    packed = files / "upx" / f"gohello-{arch}-upxlzma.exe"
                    run([str(upx), "-q", "-f", "--lzma", "-o", str(packed), str(dest)], stderr=subprocess.DEVNULL)
                    add(packed, "upx", "UPX --lzma of a Go program")
    else:
        print("packer corpus: no `go` (Debian golang-go), the Go programs are left out", file=sys.stderr)

    # The labelled corpora's PE files, by path.
    for sub in ("benign/mingw", "benign/mingw-upx", "benign/nsis", "benign/nsis-installers", "benign/wine",
                "benign/pypi", "malicious/exe", "malicious/upx"):
        for p in sorted((corpus / "files" / sub).rglob("*")):
            if p.is_file() and p.read_bytes()[:2] == b"MZ":
                add(p, "corpus:" + sub, "scripts/corpus.sh")
    shutil.rmtree(scratch)
    with open(out / "manifest.jsonl", "w") as f:
        for m in manifest:
            f.write(json.dumps(m) + "\n")


def main() -> None:
    if "--die" in sys.argv:
        die_mode()
        return
    peers = Path(os.environ.get("MALJAN_PEERS", Path.home() / ".cache/maljan-peers"))
    corpus = Path(os.environ.get("MALJAN_CORPUS", peers / "corpus"))
    out = peers / "packer-corpus"
    stamp = out / (".built-" + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16])
    if not stamp.exists():
        print(f"building the packer corpus into {out} (once)", file=sys.stderr)
        tmp = out.with_name("packer-corpus.new")
        shutil.rmtree(tmp, ignore_errors=True)
        build(peers, corpus, tmp)
        # The manifest names files under the new folder: rewrite it for the final one.
        text = (tmp / "manifest.jsonl").read_text().replace(str(tmp) + "/", str(out) + "/")
        (tmp / "manifest.jsonl").write_text(text)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        stamp.touch()
    print(f'export MALJAN_PACKER_CORPUS="{out}"')


if __name__ == "__main__":
    main()
