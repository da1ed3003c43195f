#!/usr/bin/env python3
"""detect_packer beside Detect It Easy, in one run, on the packer corpus (scripts/packer_corpus.py):
per group and per family, the files DIE names and the share where maljan names the same family,
every disagreement with its reason, and what maljan names where DIE names nothing. Prints the
Markdown that bench/analysis_packers.md holds.

Usage: eval "$(scripts/peers.sh)"
       cargo build -p maljan-analysis --example corpus_report
       python3 bench/analysis_packers.py > bench/analysis_packers.md
"""
import collections, json, os, subprocess, sys, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
REPORT = os.path.join(TARGET, "debug", "examples", "corpus_report")
PY = os.environ["MALJAN_PY"]
CORPUS = os.environ["MALJAN_PACKER_CORPUS"]

# Why a disagreement is one, by the file's name; a disagreement no reason covers is printed as
# "unexplained", so a new one shows.
REASONS = {
    "pydantic_core": "DIE's `Protector: VMProtect(new)[DS]` is its heuristic on a Rust + MSVC "
                     "extension module (pydantic-core from PyPI, built in the open on GitHub Actions, "
                     "not protected); its sections are the ordinary .text/.rdata/.data/.pdata/.reloc "
                     "and its entry point is MSVC's DllMain CRT stub; maljan names no protector there",
}

# What maljan names where DIE names nothing, family by family.
EXTRA_REASONS = {
    "MinGW GCC": "the mingw-w64 runtime's marks (`Mingw-w64 runtime failure`, `__mingw_` symbols, "
                 "the `GCC: (GNU)` banner): our programs, Wine's DLLs and NSIS's stubs, all of which "
                 "Debian builds with mingw-w64; DIE 3.09 (die-python 0.5.0) names no compiler on "
                 "any of them",
    "GCC": "the `GCC: (GNU …)` banner of a mingw-w64 program, left whole among the literal "
           "bytes of UPX's compressed stream (the runtime's other marks are not)",
    "NSIS": "NSIS's own installer stubs (exehead, Debian nsis-common's Stubs/*) with no archive "
            "appended: the `.ndata` section and `NSIS Error` string are there; DIE names an NSIS "
            "installer only when its data follows",
    "Rust": "two of rustc's marks (`/rustc/<commit>`, `library/std/src/`, `RUST_BACKTRACE`); DIE "
            "names Rust in a PE only from its own heuristic",
    "Go": "Go's build-info blob (`\\xff Go buildinf:`) and build ID survive UPX packing; DIE names "
          "the packer only",
    "Microsoft Visual C/C++": "a Rich header (MSVC's linker writes it) where DIE names nothing",
    "unknown packer": "the entropy heuristic (entry section ≥ 7.0 bits/byte, few imports)",
    "PyInstaller": "the PyInstaller bootloader's marks (`_MEIPASS`, `PyInstaller`) in its run*.exe, "
                   "which carries no archive yet",
}


def run_die(paths):
    p = subprocess.run([PY, os.path.join(REPO, "scripts/packer_corpus.py"), "--die"],
                       input="\n".join(paths) + "\n", capture_output=True, text=True, check=True)
    return {d["path"]: d for d in map(json.loads, p.stdout.splitlines())}


def run_maljan(paths):
    p = subprocess.run([REPORT], input="\n".join(paths) + "\n", capture_output=True, text=True, check=True)
    return {d["path"]: d for d in map(json.loads, p.stdout.splitlines())}


def main():
    manifest = [json.loads(l) for l in open(os.path.join(CORPUS, "manifest.jsonl"))]
    paths = [m["path"] for m in manifest]
    t0 = time.time()
    die = run_die(paths)
    t1 = time.time()
    ours = run_maljan(paths)
    t2 = time.time()
    groups = collections.OrderedDict()
    families = collections.Counter()
    family_ok = collections.Counter()
    disagreements, extras = [], collections.defaultdict(list)
    for m in manifest:
        p = m["path"]
        theirs = set(die[p]["families"])
        mine = {f["name"] for f in ours[p]["toolchain"]}
        g = groups.setdefault(m["group"], [0, 0, 0])
        g[0] += 1
        for f in mine - theirs:
            extras[f].append(p)
        if not theirs:
            continue
        g[1] += 1
        for f in theirs:
            families[f] += 1
            family_ok[f] += f in mine
        if theirs <= mine:
            g[2] += 1
        else:
            disagreements.append((p, die[p]["die"], sorted(mine)))
    named = sum(g[1] for g in groups.values())
    agreed = sum(g[2] for g in groups.values())
    out = []
    w = out.append
    w("# detect_packer beside Detect It Easy\n")
    w(f"Measured by `bench/analysis_packers.py` (one run, both tools) on the packer corpus "
      f"(`scripts/packer_corpus.py`, {len(manifest)} PE files). Detect It Easy: die-python 0.5.0, "
      f"database 3.09, `DEEP_SCAN`; its Packer/Protector/Installer/Compiler/Cryptor/SFX/Obfuscator "
      f"answers are mapped to maljan's family names by `packer_corpus.py --die` (e.g. "
      f"`Packer: UPX(4.22)[NRV,brute]` → `UPX`, `Installer: Nullsoft Scriptable Install System(3.08)` "
      f"→ `NSIS`). A file agrees when every family DIE names is among detect_packer's. "
      f"DIE took {t1 - t0:.0f} s, maljan's corpus_report (debug build, every tool it runs) {t2 - t1:.0f} s.\n")
    w(f"**Agreement where DIE names something: {agreed}/{named} = {100 * agreed / max(named, 1):.1f}%** "
      f"(the test `crates/maljan-analysis/tests/packers_agree_with_die.rs` asserts ≥ 95%).\n")
    w("## By group\n")
    w("| group | how it is made | files | DIE names | maljan agrees |\n|---|---|---:|---:|---:|")
    made = {}
    for m in manifest:
        made.setdefault(m["group"], set()).add(m["made_with"])
    for g, (n, d, a) in groups.items():
        how = "; ".join(sorted(made[g]))
        how = how if len(how) < 120 else how[:117] + "…"
        w(f"| {g} | {how} | {n} | {d} | {a} |")
    w("\n## By family DIE names\n")
    w("| family | files DIE names it in | maljan names it too |\n|---|---:|---:|")
    for f, n in families.most_common():
        w(f"| {f} | {n} | {family_ok[f]} |")
    w("\n## Every disagreement\n")
    if not disagreements:
        w("None.")
    else:
        w("| file | Detect It Easy | detect_packer | reason |\n|---|---|---|---|")
        for p, d, mine in disagreements:
            reason = next((r for k, r in REASONS.items() if k in p), "unexplained")
            w(f"| `{os.path.relpath(p, os.path.dirname(CORPUS))}` | {'; '.join(d)} | {', '.join(mine) or '—'} | {reason} |")
    w("\n## What detect_packer names beyond DIE\n")
    w("Not counted above (the target is agreement where DIE names something); listed so a false "
      "packer finding shows.\n")
    w("| family | files | an example | maljan's evidence |\n|---|---:|---|---|")
    for f, ps in sorted(extras.items(), key=lambda kv: -len(kv[1])):
        w(f"| {f} | {len(ps)} | `{os.path.relpath(ps[0], os.path.dirname(CORPUS))}` | {EXTRA_REASONS.get(f, 'unexplained')} |")
    w("\n## Not in the corpus\n")
    w("ASPack, FSG, MEW, Upack, PECompact, Petite, WWPack32, yoda's Crypter/Protector, PESpin, MPRESS, "
      "Themida/WinLicense, VMProtect, Enigma, Obsidium, ConfuserEx, .NET Reactor, Inno Setup, "
      "InstallShield, Nuitka, AutoIt and Delphi are in no package registry this machine reaches (or, "
      "like PyInstaller and Rust, build only for the host here: no Windows target is installed), and "
      "die-python carries signatures but no test files. Their signatures in "
      "`crates/maljan-analysis/src/toolchain.rs` follow the tools' documented marks (section names, "
      "entry-point stubs, marker strings) and are tested on crafted headers only "
      "(`toolchain.rs` unit tests, `tests/packers_and_compilers.rs`): **untested on real samples**.")
    print("\n".join(out))


if __name__ == "__main__":
    sys.exit(main())
