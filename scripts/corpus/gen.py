"""Builds maljan's two labelled corpora (benign, malicious-like) and the random set into one folder,
and writes manifest.jsonl (one JSON object a line) describing every file. Run by
scripts/corpus.sh, which downloads the packages first; see that script for the inputs.

Manifest fields: path (relative to the corpus folder), label (benign | malicious), corpus
(benign | malicious | random), source, kind (what the file is), container (none, or the kind of
carrier when the file carries another file), carries (what it carries: windows-program, eicar,
other), packed, sha256, size; a malicious-like program also has program, behaviours and imports
(dll!function it must import, read from its C source's `// imports:` line).

Nothing here runs a program it writes: the malicious-like programs are data."""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # nothing written into the checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))
import benign_docs  # noqa: E402
import containers  # noqa: E402

EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"


class Corpus:
    def __init__(self, root: Path):
        self.root = root
        self.files = root / "files"
        self.scratch = root / "scratch"
        self.entries: list[dict] = []
        self.seen: set[str] = set()

    def add(self, path: Path, label: str, corpus: str, source: str, kind: str, **extra) -> bool:
        """Records a file once by content: a second file with the same bytes is removed."""
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest in self.seen:
            path.unlink()
            return False
        self.seen.add(digest)
        entry = {
            "path": str(path.relative_to(self.root)),
            "label": label,
            "corpus": corpus,
            "source": source,
            "kind": kind,
            "container": extra.pop("container", "none"),
            "carries": extra.pop("carries", None),
            "packed": extra.pop("packed", False),
            "sha256": digest,
            "size": len(data),
        }
        entry.update(extra)
        self.entries.append(entry)
        return True

    def dir(self, *parts: str) -> Path:
        d = self.files.joinpath(*parts)
        d.mkdir(parents=True, exist_ok=True)
        return d


def is_pe(data: bytes) -> bool:
    if len(data) < 0x40 or data[:2] != b"MZ":
        return False
    off = int.from_bytes(data[0x3C:0x40], "little")
    return data[off : off + 4] == b"PE\0\0"


def source_header(src: Path) -> dict:
    """The `// key: value` lines at the top of a corpus C source."""
    head = {}
    for line in src.read_text().splitlines()[:8]:
        m = re.match(r"//\s*(behaviour|imports|link):\s*(.*)$", line)
        if m:
            head[m.group(1)] = m.group(2).split()
    return head


def compile_c(gcc: str, src: Path, out: Path, flags: list[str]) -> None:
    head = source_header(src)
    text = src.read_text()
    extra = []
    if "WinMain" in text:
        extra.append("-mwindows")
    if "wmain" in text:
        extra.append("-municode")
    # A fixed link time (2026-03-02) rather than none: a rebuild writes the same bytes, and the
    # programs keep the ordinary non-zero COFF time stamp a linker writes.
    env = dict(os.environ, SOURCE_DATE_EPOCH="1772443800")
    subprocess.run([gcc, *flags, "-o", str(out), str(src), *head.get("link", []), *extra], check=True, env=env)


def upx(upx_bin: str, exe: Path, out: Path) -> None:
    out.unlink(missing_ok=True)
    subprocess.run([upx_bin, "-q", "-q", "--best", "-o", str(out), str(exe)], check=True, stdout=subprocess.DEVNULL)


# --- benign Windows programs -------------------------------------------------------------------

def wine(c: Corpus, wine_root: Path, stride: int) -> None:
    pes = sorted(p for p in (wine_root / "usr/lib/x86_64-linux-gnu/wine/x86_64-windows").iterdir() if p.is_file())
    out = c.dir("benign", "wine")
    for p in pes[::stride]:
        if is_pe(p.read_bytes()):
            dest = out / p.name
            shutil.copyfile(p, dest)
            c.add(dest, "benign", "benign", "wine", "pe")


def nsis(c: Corpus, nsis_root: Path) -> None:
    base = nsis_root / "usr/share/nsis"
    out = c.dir("benign", "nsis")
    for p in sorted(base.rglob("*")):
        if p.is_file() and is_pe(p.read_bytes()):
            rel = p.relative_to(base)
            dest = out / "_".join(rel.parts)
            shutil.copyfile(p, dest)
            c.add(dest, "benign", "benign", "nsis", "pe")


NSIS_SCRIPT = """Unicode true
SetCompressor {compressor}
Name "{name}"
OutFile "{out}"
InstallDir "$PROGRAMFILES64\\Corpus Tools\\{name}"
RequestExecutionLevel admin
Page directory
Page instfiles
Section
  SetOutPath $INSTDIR
  File "{exe}"
  WriteUninstaller "$INSTDIR\\uninstall.exe"
  CreateShortcut "$SMPROGRAMS\\{name}.lnk" "$INSTDIR\\{exe_name}"
  WriteRegStr HKLM "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\{name}" "DisplayName" "{name}"
  WriteRegStr HKLM "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\{name}" "UninstallString" "$INSTDIR\\uninstall.exe"
SectionEnd
Section "Uninstall"
  Delete "$INSTDIR\\{exe_name}"
  Delete "$INSTDIR\\uninstall.exe"
  RMDir "$INSTDIR"
SectionEnd
"""


def nsis_installers(c: Corpus, nsis_root: Path, nsis_common: Path, programs: list[Path]) -> None:
    """Real NSIS installers (Debian's makensis, run from the unpacked package) of the ordinary
    programs: the installer layout every Windows user meets."""
    out = c.dir("benign", "nsis-installers")
    env = dict(os.environ, NSISDIR=str(nsis_common / "usr/share/nsis"))
    for i, exe in enumerate(programs[::2]):
        name = exe.stem.split("-")[0].replace("_", " ").title()
        compressor = ("/SOLID lzma", "zlib", "bzip2")[i % 3]
        dest = out / f"{exe.stem}-setup.exe"
        # NSIS stores the packed file's time: a fixed one, so a rebuild writes the same bytes.
        os.utime(exe, (1_772_443_800, 1_772_443_800))
        script = c.scratch / f"{exe.stem}.nsi"
        script.write_text(NSIS_SCRIPT.format(compressor=compressor, name=name, out=dest, exe=exe, exe_name=exe.name))
        subprocess.run([str(nsis_root / "usr/bin/makensis"), "-V1", "-NOCD", str(script)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        c.add(dest, "benign", "benign", "nsis-installer", "pe", carries="windows-program", program=exe.stem.rsplit("-", 1)[0])


def pypi(c: Corpus, wheels: Path, per_wheel: int) -> None:
    import zipfile

    for whl in sorted(wheels.glob("*.whl")):
        project = whl.name.split("-")[0].lower()
        out = c.dir("benign", "pypi", project)
        with zipfile.ZipFile(whl) as z:
            names = sorted(n for n in z.namelist() if re.search(r"\.(pyd|dll|exe)$", n, re.I))
            for n in names[:per_wheel]:
                data = z.read(n)
                if not is_pe(data):
                    continue
                dest = out / n.replace("/", "_")
                dest.write_bytes(data)
                c.add(dest, "benign", "benign", "pypi", "pe", package=whl.name)


def mingw_benign(c: Corpus, repo: Path, gcc: str, upx_bin: str) -> list[Path]:
    """Each ordinary program twice (optimised, and size-optimised and stripped), and each of those
    packed with UPX (the packed-only class)."""
    out = c.dir("benign", "mingw")
    packed = c.dir("benign", "mingw-upx")
    built = []
    for src in sorted((repo / "scripts/corpus/benign").glob("*.c")):
        for tag, flags in (("o2", ["-O2"]), ("os", ["-Os", "-s"])):
            exe = out / f"{src.stem}-{tag}.exe"
            compile_c(gcc, src, exe, flags)
            c.add(exe, "benign", "benign", "mingw", "pe", program=src.stem)
            built.append(exe)
            up = packed / f"{src.stem}-{tag}-upx.exe"
            upx(upx_bin, exe, up)
            c.add(up, "benign", "benign", "mingw-upx", "pe", packed=True, program=src.stem)
    return built


def elf(c: Corpus, count: int) -> None:
    """ELF programs from this machine's /usr/bin, a deterministic spread over the sorted list."""
    cands = []
    for p in sorted(Path("/usr/bin").iterdir()):
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_size < 20 << 20:
                with p.open("rb") as f:
                    if f.read(4) == b"\x7fELF":
                        cands.append(p)
        except OSError:
            continue
    step = max(1, len(cands) // count)
    out = c.dir("benign", "elf")
    for p in cands[::step][:count]:
        dest = out / p.name
        shutil.copyfile(p, dest)
        c.add(dest, "benign", "benign", "elf", "elf")


# --- malicious-like ----------------------------------------------------------------------------

def malicious(c: Corpus, repo: Path, gcc: str, upx_bin: str, seven_zip: str, ole: str) -> None:
    exe_dir = c.dir("malicious", "exe")
    upx_dir = c.dir("malicious", "upx")
    for src in sorted((repo / "scripts/corpus/malicious").glob("*.c")):
        head = source_header(src)
        meta = {"program": src.stem, "behaviours": head.get("behaviour", []), "imports": head.get("imports", [])}
        exe = exe_dir / f"{src.stem}.exe"
        compile_c(gcc, src, exe, ["-O2"])
        c.add(exe, "malicious", "malicious", "mingw", "pe", **meta)
        up = upx_dir / f"{src.stem}-upx.exe"
        upx(upx_bin, exe, up)
        c.add(up, "malicious", "malicious", "mingw-upx", "pe", packed=True,
              program=src.stem, behaviours=meta["behaviours"])
        carry(c, exe.read_bytes(), f"{src.stem}.exe", "windows-program", src.stem, seven_zip, ole)
    # The EICAR test file, bare and in every carrier kind.
    eicar_dir = c.dir("malicious", "eicar")
    bare = eicar_dir / "eicar.com"
    bare.write_bytes(EICAR)
    c.add(bare, "malicious", "malicious", "eicar", "com", program="eicar")
    carry(c, EICAR, "eicar.com", "eicar", "eicar", seven_zip, ole)


def carry(c: Corpus, payload: bytes, name: str, what: str, stem: str, seven_zip: str, ole: str) -> None:
    """The payload inside a zip, a 7z, a mail, a PDF, a Word document, an RTF document and an HTML
    page."""
    source = "eicar" if what == "eicar" else "carrier"
    meta = {"carries": what, "program": stem}
    d = c.dir("malicious", "zip")
    p = d / f"{stem}.zip"
    containers.write_zip(p, [(name, payload)])
    c.add(p, "malicious", "malicious", source, "zip", container="zip", **meta)
    d = c.dir("malicious", "7z")
    p = d / f"{stem}.7z"
    containers.write_7z(p, [(name, payload)], seven_zip, c.scratch)
    c.add(p, "malicious", "malicious", source, "7z", container="7z", **meta)
    d = c.dir("malicious", "mail")
    p = d / f"{stem}.eml"
    containers.write_mail(
        p, "Invoice INV-20931 overdue",
        "Dear customer,\n\nplease find the overdue invoice attached and settle it today.\n\nAccounts\n",
        [(name, payload, "application/octet-stream")],
    )
    c.add(p, "malicious", "malicious", source, "mail", container="mail", **meta)
    d = c.dir("malicious", "pdf")
    p = d / f"{stem}.pdf"
    containers.write_pdf_with_attachment(p, "Shipping document DHL-552031", name, payload, "application/octet-stream")
    c.add(p, "malicious", "malicious", source, "pdf", container="pdf", **meta)
    d = c.dir("malicious", "doc")
    p = d / f"{stem}.doc"
    tmp = c.scratch / name
    tmp.write_bytes(payload)
    containers.write_word_package(p, ole, "Purchase order PO-7731 (confidential)", tmp, name)
    c.add(p, "malicious", "malicious", source, "doc", container="doc", **meta)
    d = c.dir("malicious", "rtf")
    p = d / f"{stem}.rtf"
    containers.write_rtf_package(p, "Remittance advice RA-40417", name, payload)
    c.add(p, "malicious", "malicious", source, "rtf", container="rtf", **meta)
    d = c.dir("malicious", "html")
    p = d / f"{stem}.html"
    containers.write_html_smuggle(p, name, payload)
    c.add(p, "malicious", "malicious", source, "html", container="html", **meta)


# --- random and compressed bytes ---------------------------------------------------------------

WORDS = (
    "the of and to in is was for on that with as by at from this which be or are an not have it his "
    "but were had they all one their there been has more other when can would who so what into time "
    "only some could them see these two may first then do any like my now over such our man me even "
    "most made after also did many before must through back years where much your way well down "
    "should because each just those people how too little state good very make world still own"
).split()


def random_set(c: Corpus, seed: int) -> None:
    """Random bytes from 1 KiB to 50 MiB, and compressed text (which looks random too); seeded."""
    import bz2
    import gzip
    import lzma
    import zlib

    rng = random.Random(seed)
    out = c.dir("random")
    for size, name in ((1 << 10, "1k"), (64 << 10, "64k"), (1 << 20, "1m"), (10 << 20, "10m"), (50 << 20, "50m")):
        p = out / f"random-{name}.bin"
        p.write_bytes(rng.randbytes(size))
        c.add(p, "benign", "random", "random", "bin")
    text = " ".join(rng.choice(WORDS) for _ in range(1_200_000)).encode()
    for name, kind, data in (
        ("text-6m.zz", "zlib", zlib.compress(text, 6)),
        ("text-6m.bz2", "bz2", bz2.compress(text, 9)),
        ("text-6m.xz", "xz", lzma.compress(text)),
        ("text-6m.gz", "gz", gzip.compress(text, mtime=0)),
        ("random-4m.gz", "gz", gzip.compress(rng.randbytes(4 << 20), mtime=0)),
    ):
        p = out / name
        p.write_bytes(data)
        c.add(p, "benign", "random", "random", kind)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--gcc", required=True)
    ap.add_argument("--upx", required=True)
    ap.add_argument("--seven-zip", required=True)
    ap.add_argument("--ole", required=True, help="the corpus-ole program (maljan-bench)")
    ap.add_argument("--wine-root", type=Path, required=True)
    ap.add_argument("--nsis-root", type=Path, required=True, help="nsis-common, unpacked")
    ap.add_argument("--nsis-bin-root", type=Path, required=True, help="nsis (makensis), unpacked")
    ap.add_argument("--wheels", type=Path, required=True)
    ap.add_argument("--wine-stride", type=int, default=3)
    ap.add_argument("--per-wheel", type=int, default=12)
    ap.add_argument("--elf", type=int, default=40)
    ap.add_argument("--seed", type=int, default=40)
    a = ap.parse_args()

    c = Corpus(a.corpus)
    if c.files.exists():
        shutil.rmtree(c.files)
    c.scratch.mkdir(parents=True, exist_ok=True)
    wine(c, a.wine_root, a.wine_stride)
    nsis(c, a.nsis_root)
    pypi(c, a.wheels, a.per_wheel)
    programs = mingw_benign(c, a.repo, a.gcc, a.upx)
    nsis_installers(c, a.nsis_bin_root, a.nsis_root, programs)
    elf(c, a.elf)
    benign_docs.build(c, programs, a.seven_zip, a.ole, a.seed)
    malicious(c, a.repo, a.gcc, a.upx, a.seven_zip, a.ole)
    random_set(c, a.seed)
    shutil.rmtree(c.scratch, ignore_errors=True)

    manifest = a.corpus / "manifest.jsonl"
    with manifest.open("w") as f:
        for e in c.entries:
            f.write(json.dumps(e, sort_keys=True) + "\n")
    by = {}
    for e in c.entries:
        key = (e["corpus"], e["source"])
        by[key] = by.get(key, 0) + 1
    for (corpus, source), n in sorted(by.items()):
        print(f"{corpus:10} {source:12} {n:5}", file=sys.stderr)
    print(f"{len(c.entries)} files, manifest {manifest}", file=sys.stderr)


if __name__ == "__main__":
    main()
