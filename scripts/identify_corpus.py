#!/usr/bin/env python3
"""Builds identify_file's side-by-side corpus (issue 42 item 3) once, from the package registries,
and records what libmagic says of every file.

  Debian   a few dozen varied packages (`apt-get download`, unpacked with `dpkg-deb -x`, never
           installed): man pages, icons and backgrounds, fonts, time zones, certificates and
           keyrings, Perl/Python/Ruby/PHP/Lua/Tcl/shell/JavaScript sources, XML catalogues and DTDs,
           sounds, Java archives, ELF programs and libraries, vim's runtime, word lists.
  PyPI     wheels and sdists (`pip download --no-deps`, pinned): pure-Python and binary wheels for
           Linux and Windows (ELF .so, PE .pyd/.dll/.exe), sdists with C and Rust sources,
           Django's and Sphinx's templates, translations and static files, matplotlib's data.

Up to PER_PACKAGE files a package are kept (a stable hash of the path picks them, so every
package weighs alike), unique by SHA-256, plus the downloaded .deb, .whl and .tar.gz themselves.
The manifest ($CORPUS/manifest.jsonl) holds, per file, its path under $CORPUS, its package, size,
SHA-256 and libmagic's answers at build time (`file --brief`, `file --brief --mime-type`); its
first line names the libmagic version. Nothing here is ever run.

Usage: scripts/identify_corpus.py          prints `export MALJAN_IDENTIFY_CORPUS=...` (builds once)
       scripts/identify_corpus.py --force  rebuilds
Environment: MALJAN_PEERS (default ~/.cache/maljan-peers), MALJAN_IDENTIFY_CORPUS (default
$MALJAN_PEERS/corpus-identify).
"""
import fcntl, hashlib, json, os, shutil, subprocess, sys, tarfile, zipfile

PEERS = os.environ.get("MALJAN_PEERS", os.path.expanduser("~/.cache/maljan-peers"))
CORPUS = os.environ.get("MALJAN_IDENTIFY_CORPUS", os.path.join(PEERS, "corpus-identify"))
# Bump when the sources or the selection change.
STAMP = os.path.join(CORPUS, ".built-v1")
PER_PACKAGE = 80

DEBIAN = """
adwaita-icon-theme autoconf bash-completion busybox ca-certificates debian-archive-keyring
desktop-base docbook-xml fonts-dejavu-core fonts-font-awesome fonts-liberation gettext-base
gsfonts hicolor-icon-theme iso-codes libcommons-lang3-java libjs-bootstrap4 libjs-jquery
libjs-underscore libjson-perl libpng16-16 libsqlite3-0 liburi-perl lua5.4 m4 manpages media-types
php-common python3-docutils python3-jinja2 python3-pygments python3-six python3-yaml ruby-minitest
ruby-rack sgml-base shared-mime-info sound-theme-freedesktop tcl8.6 tzdata vim-runtime wamerican
xdg-utils xml-core
""".split()

# Wheels (binary allowed; Linux and Windows builds for the compiled ones) and sdists, pinned.
WHEELS = """
requests==2.34.2 setuptools==84.2.1 certifi==2026.10.19.post1 pytz==2026.6 matplotlib==3.11.2
sphinx==9.0.4 django==5.2.20 babel==2.19.0 tzdata==2026.6 fonttools==4.69.1 pillow==13.0.0
numpy==2.4.6
""".split()
SDISTS = """
six==1.17.0 attrs==26.1.0 pyyaml==6.0.4 lxml==6.2.1 docutils==0.23.1 pygments==2.21.0
markupsafe==3.0.4
""".split()


def emit():
    print(f'export MALJAN_IDENTIFY_CORPUS="{CORPUS}"')


def run(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=sys.stderr, **kw)


def download():
    debs = os.path.join(CORPUS, "debs")
    pypi = os.path.join(CORPUS, "pypi")
    os.makedirs(debs, exist_ok=True)
    os.makedirs(pypi, exist_ok=True)
    have = {f.split("_")[0] for f in os.listdir(debs)}
    missing = [p for p in DEBIAN if p not in have]
    if missing:
        run(["apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root", *missing], cwd=debs)
    pip = [os.path.join(PEERS, "venv", "bin", "pip"), "download", "-q", "--disable-pip-version-check",
           "--no-deps", "--dest", pypi]
    run(pip + ["--only-binary", ":all:", "--python-version", "3.11", "--platform", "manylinux2014_x86_64",
               "--platform", "win_amd64", "--platform", "any", *WHEELS])
    run(pip + ["--no-binary", ":all:", *SDISTS])


def unpack():
    """Each download into extract/<name>/; returns [(package, download path, folder)]."""
    out = []
    root = os.path.join(CORPUS, "extract")
    for sub in ("debs", "pypi"):
        d = os.path.join(CORPUS, sub)
        for f in sorted(os.listdir(d)):
            src = os.path.join(d, f)
            name = f.split("_")[0] if sub == "debs" else f
            dest = os.path.join(root, name)
            if not os.path.isdir(dest):
                tmp = dest + ".tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                os.makedirs(tmp)
                if f.endswith(".deb"):
                    run(["dpkg-deb", "-x", src, tmp])
                elif f.endswith(".whl") or f.endswith(".zip"):
                    with zipfile.ZipFile(src) as z:
                        z.extractall(tmp)
                else:
                    with tarfile.open(src) as t:
                        t.extractall(tmp, filter="data")
                os.rename(tmp, dest)
            out.append((name, src, dest))
    return out


def select(packages):
    chosen, seen = [], set()

    def take(package, path):
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        if digest in seen:
            return
        seen.add(digest)
        chosen.append({"path": os.path.relpath(path, CORPUS), "package": package,
                       "size": os.path.getsize(path), "sha256": digest})

    for package, download_path, folder in packages:
        take(package, download_path)
        files = []
        for d, dirs, names in os.walk(folder):
            dirs.sort()
            for n in names:
                p = os.path.join(d, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    files.append(p)
        rank = lambda p: hashlib.sha256(os.path.relpath(p, folder).encode()).digest()
        for p in sorted(files, key=rank)[:PER_PACKAGE]:
            take(package, p)
    return chosen


def libmagic(entries):
    """`file --brief` and `file --brief --mime-type` of every entry, one `file` run each."""
    listing = os.path.join(CORPUS, "files.txt")
    with open(listing, "w") as fh:
        fh.writelines(os.path.join(CORPUS, e["path"]) + "\n" for e in entries)
    for key, extra in (("libmagic", []), ("mime", ["--mime-type"])):
        out = subprocess.run(["file", "--brief", "--no-pad", *extra, "--files-from", listing],
                             check=True, capture_output=True, text=True).stdout.splitlines()
        assert len(out) == len(entries), (key, len(out), len(entries))
        for e, line in zip(entries, out):
            e[key] = line
    os.remove(listing)


def main():
    if "--force" in sys.argv and os.path.exists(STAMP):
        os.remove(STAMP)
    if os.path.exists(STAMP):
        return emit()
    os.makedirs(CORPUS, exist_ok=True)
    with open(os.path.join(CORPUS, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two shells building at once: the second waits
        if not os.path.exists(STAMP):
            print(f"building identify_file's corpus into {CORPUS} (once)", file=sys.stderr)
            download()
            entries = select(unpack())
            libmagic(entries)
            version = subprocess.run(["file", "--version"], capture_output=True, text=True).stdout.split()[0]
            with open(os.path.join(CORPUS, "manifest.jsonl"), "w") as fh:
                fh.write(json.dumps({"libmagic": version, "files": len(entries)}) + "\n")
                fh.writelines(json.dumps(e) + "\n" for e in entries)
            open(STAMP, "w").close()
    emit()


if __name__ == "__main__":
    main()
