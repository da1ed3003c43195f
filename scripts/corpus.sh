#!/usr/bin/env bash
# Builds maljan's labelled corpora (issue 40) once into a cache folder (MALJAN_CORPUS, default
# $MALJAN_PEERS/corpus) and prints `export MALJAN_CORPUS=...` for the tests and the verdicts bench,
# and `export MALJAN_UPX=...`: the upx it packs with, which the analysis server's `unpack` uses too.
#
#   benign          Wine's PE DLLs/EXEs (Debian libwine), NSIS stubs and plug-ins (Debian
#                   nsis-common) and installers made with its makensis (Debian nsis), the
#                   .pyd/.dll/.exe files of well-known Windows wheels (PyPI), the ordinary C
#                   programs of scripts/corpus/benign compiled with mingw-w64 and packed with
#                   UPX, ELF programs from /usr/bin, PDF/Office documents, mails and archives.
#   malicious-like  the C programs of scripts/corpus/malicious compiled with mingw-w64, UPX-packed,
#                   and carried in a zip, a 7z, a mail, a PDF (/EmbeddedFile), a Word document
#                   (OLE Package), an RTF document (OLE1 Package) and an HTML page (a base64
#                   download); the EICAR test file bare and in each of those carriers.
#   random          seeded random and compressed bytes, 1 KiB to 50 MiB.
#
# Everything comes from the package registries (Debian, PyPI, crates.io for the OLE writer) or is
# built here; nothing is committed that this script can rebuild, and nothing it builds is ever run.
# The tools (mingw-w64, p7zip, the Python document libraries) are installed by scripts/peers.sh;
# UPX comes from Debian bookworm-backports (bookworm has no upx-ucl) and is only unpacked into the
# cache. `--force` rebuilds. The manifest is $MALJAN_CORPUS/manifest.jsonl (see scripts/corpus/gen.py).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PEERS="${MALJAN_PEERS:-$HOME/.cache/maljan-peers}"
CORPUS="${MALJAN_CORPUS:-$PEERS/corpus}"
PY="$PEERS/venv/bin/python"
# Bump when the corpus content changes (a source, a version, a generator): the stamp says which
# build is in the folder.
stamp="$CORPUS/.built-v4"
if [ "${1:-}" = "--force" ]; then rm -f "$stamp"; fi
if [ -f "$stamp" ] && [ -f "$CORPUS/manifest.jsonl" ]; then
  echo "export MALJAN_CORPUS=\"$CORPUS\""
  echo "export MALJAN_UPX=\"$CORPUS/tools/upx/usr/bin/upx-ucl\""
  exit 0
fi
mkdir -p "$CORPUS/tools" "$CORPUS/debs" "$CORPUS/wheels"
# One build at a time (two shells running peers.sh at once): the second waits, then finds the stamp.
exec 9>"$CORPUS/.lock"
flock 9
if [ -f "$stamp" ] && [ -f "$CORPUS/manifest.jsonl" ]; then
  echo "export MALJAN_CORPUS=\"$CORPUS\""
  echo "export MALJAN_UPX=\"$CORPUS/tools/upx/usr/bin/upx-ucl\""
  exit 0
fi
echo "building the labelled corpora into $CORPUS (once)" >&2
rm -f "$CORPUS"/.built-v*
for tool in x86_64-w64-mingw32-gcc 7z; do
  command -v "$tool" >/dev/null || { echo "corpus: $tool is missing (scripts/peers.sh installs it)" >&2; exit 1; }
done

# UPX 4 from bookworm-backports, through a private apt configuration: only this one .deb is
# fetched and unpacked; the system's sources and packages are left as they are.
UPX="$CORPUS/tools/upx/usr/bin/upx-ucl"
if [ ! -x "$UPX" ]; then
  apt_dir="$CORPUS/tools/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main" \
    > "$apt_dir/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
  apt-get -qq "${apt_opts[@]}" update >&2
  (cd "$CORPUS/debs" && apt-get -qq "${apt_opts[@]}" download 'upx-ucl/bookworm-backports' >&2)
  dpkg-deb -x "$(ls "$CORPUS"/debs/upx-ucl_*.deb | head -1)" "$CORPUS/tools/upx"
fi

# Debian packages whose PE files are benign samples: downloaded and unpacked, never installed.
for pkg in libwine nsis-common nsis; do
  if [ ! -d "$CORPUS/tools/$pkg" ]; then
    (cd "$CORPUS/debs" && apt-get -qq -o APT::Sandbox::User=root download "$pkg" >&2)
    dpkg-deb -x "$(ls "$CORPUS"/debs/"${pkg}"_*.deb | head -1)" "$CORPUS/tools/$pkg.tmp"
    mv "$CORPUS/tools/$pkg.tmp" "$CORPUS/tools/$pkg"
  fi
done

# Windows wheels of well-known PyPI projects (pinned): their .pyd/.dll/.exe files.
wheels=(pywin32==312 pyinstaller==6.22.3 numpy==2.4.6 pillow==13.0.0 cryptography==51.0.1
        psutil==7.2.2 lxml==6.2.1 pyzmq==27.3.0 markupsafe==3.0.4 pyyaml==6.0.4
        charset-normalizer==3.5.3 regex==2026.12.2 pydantic-core==2.50.5 orjson==3.13.0
        greenlet==3.5.6 cffi==2.1.1 msgpack==1.2.4 bcrypt==5.0.0 zstandard==0.25.0
        pycryptodome==4.5.0 pywinpty==3.1.2 pygame==2.6.1 kiwisolver==1.5.1 contourpy==1.3.3
        matplotlib==3.11.2 tornado==6.6.1 wrapt==2.5.2 simplejson==4.3.0 ujson==6.1.0
        rpds-py==2026.9.1 aiohttp==3.14.5 yarl==1.25.1 frozenlist==1.8.0 multidict==7.2.1
        setuptools==84.2.1 distlib==0.4.4 pandas==3.1.1)
if [ "$(ls "$CORPUS/wheels" | wc -l)" -lt "${#wheels[@]}" ]; then
  "$PEERS/venv/bin/pip" download --quiet --disable-pip-version-check --only-binary=:all: \
    --platform win_amd64 --python-version 3.11 --no-deps -d "$CORPUS/wheels" "${wheels[@]}" >&2
fi

# The Word documents' writer (OLE2 with an OLE Package), from maljan-bench.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${TMPDIR:-/tmp}/maljan-target}"
(cd "$REPO" && cargo build --quiet -p maljan-bench --bin corpus-ole >&2)
OLE="$CARGO_TARGET_DIR/debug/corpus-ole"

"$PY" "$REPO/scripts/corpus/gen.py" --corpus "$CORPUS" --repo "$REPO" \
  --gcc x86_64-w64-mingw32-gcc --upx "$UPX" --seven-zip "$(command -v 7z)" --ole "$OLE" \
  --wine-root "$CORPUS/tools/libwine" --nsis-root "$CORPUS/tools/nsis-common" \
  --nsis-bin-root "$CORPUS/tools/nsis" --wheels "$CORPUS/wheels" >&2
touch "$stamp"
echo "export MALJAN_CORPUS=\"$CORPUS\""
echo "export MALJAN_UPX=\"$UPX\""
