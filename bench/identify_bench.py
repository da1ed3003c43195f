#!/usr/bin/env python3
"""identify_file beside libmagic, in one run, on the registries' corpus (issue 42 item 3).

Runs `file --brief` and `file --brief --mime-type` (live, one process each) and identify_file
(the identify_paths example: the tool's own call on each file's bytes) over every file of
scripts/identify_corpus.py's corpus, maps both answers to a family with
bench/identify_families.tsv (the same table tests/identify_libmagic.rs reads), and prints the
Markdown that bench/analysis_identify.md holds: agreement by family, every disagreement side by
side, the MIME types' agreement, and the issue's own cases (HTML and SVG carrying a program, a
Symbian SIS package) with both answers.

Usage: eval "$(scripts/peers.sh)"
       cargo build -p maljan-analysis --example identify_paths
       python3 bench/identify_bench.py
"""
import base64, collections, json, os, re, struct, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
IDENTIFY = os.path.join(TARGET, "debug", "examples", "identify_paths")
CORPUS = os.environ.get("MALJAN_IDENTIFY_CORPUS")


def families():
    libmagic, equivalent = [], set()
    for line in open(os.path.join(REPO, "bench", "identify_families.tsv")):
        if not line.strip() or line.startswith("#"):
            continue
        cols = [c for c in line.rstrip("\n").split("\t") if c]
        if cols[0] == "libmagic":
            libmagic.append((re.compile(cols[1]), cols[2]))
        else:
            equivalent.add((cols[1], cols[2]))
    return libmagic, equivalent


def libmagic_family(rules, desc):
    for rx, fam in rules:
        if rx.search(desc):  # the Rust test uses regex's is_match: a search, as here
            return fam
    return "other:" + desc.split(",")[0]


def our_family(r):
    if r["kind"] == "script":
        return "script:" + r["details"].get("language", "?")
    if r["kind"] == "xml" and r["details"].get("format") == "svg":
        return "svg"
    return r["kind"]


def run_file(paths, extra):
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:
        listing.writelines(p + "\n" for p in paths)
        listing.flush()
        out = subprocess.run(["file", "--brief", "--no-pad", *extra, "--files-from", listing.name],
                             check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(out) == len(paths)
    return out


def run_ours(paths):
    out = subprocess.run([IDENTIFY], input="".join(p + "\n" for p in paths), check=True,
                         capture_output=True, text=True).stdout.splitlines()
    return {r["path"]: r for r in map(json.loads, out)}


def issue_cases(dirname):
    """The issue's own files: HTML and SVG carrying a program (a real PE from the corpus), SIS."""
    pe = next(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(CORPUS, "extract"))
              for f in sorted(fs) if f.endswith((".exe", ".dll", ".pyd")) and os.path.getsize(os.path.join(d, f)) < 2_000_000)
    blob = base64.b64encode(open(pe, "rb").read()).decode()
    files = {
        "smuggling.html": f'<!DOCTYPE html>\n<html><body><a download="invoice.exe" href="data:application/x-msdownload;base64,{blob}">Invoice</a></body></html>\n',
        "smuggling-script.html": "<html><head><title>Invoice</title></head><body><script>\nvar b = `"
        + "\n".join(blob[i:i + 76] for i in range(0, len(blob), 76))
        + "`;\nvar a = document.createElement('a'); a.href = URL.createObjectURL(new Blob([atob(b)]));\n</script></body></html>\n",
        "carrier.svg": f'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"><a xlink:href="data:application/octet-stream;base64,{blob}"><text>Open</text></a></svg>\n',
        "app-9x.sis": struct.pack("<IIII", 0x10201A7A, 0, 0x2000ABCD, 0) + b"\0" * 200,
        "app-epoc.sis": struct.pack("<IIII", 0x2000ABCD, 0x1000006D, 0x10000419, 0) + b"\0" * 200,
    }
    paths = []
    for name, data in files.items():
        p = os.path.join(dirname, name)
        with open(p, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        paths.append(p)
    return paths


def main():
    if not CORPUS or not os.path.exists(os.path.join(CORPUS, "manifest.jsonl")):
        sys.exit('MALJAN_IDENTIFY_CORPUS is unset or unbuilt: eval "$(scripts/peers.sh)"')
    if not os.path.exists(IDENTIFY):
        sys.exit(f"{IDENTIFY} is missing: cargo build -p maljan-analysis --example identify_paths")
    rules, equivalent = families()
    lines = open(os.path.join(CORPUS, "manifest.jsonl")).read().splitlines()
    entries = [json.loads(l) for l in lines[1:]]
    paths = [os.path.join(CORPUS, e["path"]) for e in entries]
    t = time.monotonic()
    described, mimes = run_file(paths, []), run_file(paths, ["--mime-type"])
    t_file = time.monotonic() - t
    t = time.monotonic()
    ours = run_ours(paths)
    t_ours = time.monotonic() - t
    version = subprocess.run(["file", "--version"], capture_output=True, text=True).stdout.split()[0]
    packages = len({e["package"] for e in entries})

    by_family = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    disagreements, same_mime = [], 0
    for e, path, desc, mime in zip(entries, paths, described, mimes):
        r = ours[path]
        theirs, mine = libmagic_family(rules, desc), our_family(r)
        ok = theirs == mine or (theirs, mine) in equivalent
        slot = by_family[theirs]
        slot[0] += 1
        slot[1] += ok
        same_mime += r["mime"] == mime
        if not ok:
            slot[2][mine] += 1
            disagreements.append((theirs, mine, e["path"], desc, r["description"]))
    total = len(entries)
    agreed = sum(v[1] for v in by_family.values())
    print(f"## identify_file vs libmagic ({version}), {total} files from {packages} registry packages\n")
    print(f"Agreement on the family: **{agreed}/{total} = {100 * agreed / total:.1f}%** "
          f"(same MIME type as `file --mime-type`: {same_mime}/{total} = {100 * same_mime / total:.1f}%). "
          f"Wall time, debug build of identify_paths: {t_ours:.1f} s for identify_file, "
          f"{t_file:.1f} s for the two `file` runs.\n")
    print("| family (libmagic's) | files | agree | % | what identify_file said instead |")
    print("|---|---:|---:|---:|---|")
    for fam in sorted(by_family, key=lambda k: (-by_family[k][0], k)):
        n, a, c = by_family[fam]
        print(f"| {fam} | {n} | {a} | {100 * a / n:.0f} | {', '.join(f'{k}×{v}' for k, v in c.most_common(3))} |")
    print(f"\n### Every disagreement ({len(disagreements)})\n")
    print("| libmagic family | identify_file family | file | `file --brief` | identify_file |")
    print("|---|---|---|---|---|")
    for theirs, mine, path, desc, d in sorted(disagreements):
        short = "/".join(path.split("/")[1:2] + ["…"] + path.split("/")[-2:])
        print(f"| {theirs} | {mine} | {short} | {desc[:70]} | {d[:60]} |")

    with tempfile.TemporaryDirectory(prefix="maljan-identify-") as tmp:
        cases = issue_cases(tmp)
        ours = run_ours(cases)
        print("\n### The issue's cases\n")
        print("| file | `file --brief` | identify_file |\n|---|---|---|")
        for p, desc in zip(cases, run_file(cases, [])):
            print(f"| {os.path.basename(p)} | {desc[:60]} | {ours[p]['kind']}: {ours[p]['description']} |")


if __name__ == "__main__":
    main()
