#!/usr/bin/env bash
# Samples per second of `maljan analyze DIR --jobs N` (one process, shared tool servers) for
# --jobs 1, 2 and 4, beside one `maljan analyze SAMPLE` process per sample, in one run, on
# third-party files of 1–100 KB (programs and libraries from /usr/bin and /usr/lib, documentation
# from /usr/share/doc), unique by sha256, no model (--no-agent). Each figure is the median of RUNS
# runs, each on a fresh data directory; "linear" repeats --jobs 4 on a quarter and a half of the
# samples. Writes bench/bulk.md (or OUT).
# Usage: bench/bulk.sh [MALJAN_BINARY] [SAMPLES] [RUNS] [OUT]
#   MALJAN_BINARY  default ${CARGO_TARGET_DIR:-target}/release/maljan
#   SAMPLES        default 400 (one process per sample runs on a quarter of them)
#   RUNS           default 3
set -euo pipefail
BIN="$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/maljan}")"
SAMPLES="${2:-400}"
RUNS="${3:-3}"
OUT="${4:-$(dirname "$0")/bulk.md}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
unset MALJAN_CONFIG MALJAN_LLM_MODEL MALJAN_LLM_PROVIDER MALJAN_LLM_BASE_URL MALJAN_DATABASE_URL
export MALJAN_LOG=error

# The corpus: half programs and libraries, half documentation, each 1–100 KB, unique by sha256,
# in a fixed order (sorted paths), copied under neutral names.
pick() {
  find "$@" -xdev -type f -size +1k -size -101k -readable 2>/dev/null | LC_ALL=C sort
}
mkdir -p "$WORK/all"
pick /usr/bin /usr/lib >"$WORK/programs"
pick /usr/share/doc >"$WORK/docs"
python3 - "$WORK/all" "$SAMPLES" "$WORK/programs" "$WORK/docs" <<'PYEOF'
import hashlib, os, shutil, sys
out, n, programs, docs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
seen, taken = set(), []
for listing, want in [(programs, n - n // 2), (docs, n // 2)]:
    got = 0
    for p in open(listing).read().splitlines():
        if got == want:
            break
        try:
            data = open(p, 'rb').read()
        except OSError:
            continue
        h = hashlib.sha256(data).hexdigest()
        if h in seen or not (1024 < len(data) <= 100 * 1024):
            continue
        seen.add(h)
        taken.append(p)
        got += 1
for i, p in enumerate(taken):
    shutil.copyfile(p, os.path.join(out, f"s{i:05d}-{os.path.basename(p)}"))
PYEOF
N=$(ls "$WORK/all" | wc -l)
[ "$N" -ge 8 ] || { echo "too few samples found: $N" >&2; exit 1; }
QUARTER=$((N / 4)); HALF=$((N / 2))
mkdir -p "$WORK/q" "$WORK/h"
# Every fourth and every second file: the same mix of kinds as the whole.
ls "$WORK/all" | LC_ALL=C sort | awk 'NR % 4 == 1' | head -n "$QUARTER" | while read -r f; do ln "$WORK/all/$f" "$WORK/q/$f"; done
ls "$WORK/all" | LC_ALL=C sort | awk 'NR % 2 == 1' | head -n "$HALF" | while read -r f; do ln "$WORK/all/$f" "$WORK/h/$f"; done
KB=$(du -sk "$WORK/all" | cut -f1)

# One timed run: prints "seconds max_rss_kb exit_status".
timed() {
  local start end rss status
  start=$(date +%s.%N)
  set +e
  /usr/bin/time -f %M -o "$WORK/rss" "$@" >/dev/null 2>"$WORK/stderr"
  status=$?
  set -e
  end=$(date +%s.%N)
  rss=$(tail -1 "$WORK/rss")
  python3 -c "print(f'{$end - $start:.3f} $rss $status')"
}

run_bulk() { # dir jobs → "seconds rss status not_analysed"
  local home="$WORK/home-$RANDOM$RANDOM" out="$WORK/out-$RANDOM$RANDOM" line bad
  mkdir -p "$home" "$out"
  line=$(cd "$out" && export MALJAN_HOME="$home" && timed "$BIN" analyze --no-agent "$1" --jobs "$2" --report "$out" --index "$out/index.json")
  bad=$(python3 -c "import json; r=json.load(open('$out/index.json'))['samples']; print(sum(x['status'] not in ('complete','degraded') for x in r))" 2>/dev/null || echo all)
  [ -f "$WORK/index.json" ] || cp "$out/index.json" "$WORK/index.json" 2>/dev/null || true
  rm -rf "$home" "$out"
  echo "$line $bad"
}

run_per_process() { # dir → "seconds rss status not_analysed"
  local home="$WORK/home-$RANDOM$RANDOM" out="$WORK/out-$RANDOM$RANDOM" line n
  mkdir -p "$home" "$out"
  cat >"$WORK/each.sh" <<EOS
for f in "$1"/*; do
  "$BIN" analyze --no-agent "\$f" --report "$out/\$(basename "\$f").md" >/dev/null 2>&1
done
exit 0
EOS
  line=$(cd "$out" && export MALJAN_HOME="$home" && timed bash "$WORK/each.sh")
  n=$(ls "$out" | wc -l)
  rm -rf "$home" "$out"
  echo "$line $(( $(ls "$1" | wc -l) - n ))"
}

: >"$WORK/results"
record() { echo "$*" >>"$WORK/results"; }
# Interleaved by run: a slow moment of the host is shared out rather than landing on one mode.
for r in $(seq 1 "$RUNS"); do
  echo "run $r/$RUNS: one process per sample ($QUARTER samples)" >&2
  record per-process "$QUARTER" $(run_per_process "$WORK/q")
  for j in 1 2 4; do
    echo "run $r/$RUNS: --jobs $j ($N samples)" >&2
    record "jobs-$j" "$N" $(run_bulk "$WORK/all" "$j")
  done
  echo "run $r/$RUNS: --jobs 4 on $QUARTER and $HALF samples" >&2
  record "jobs-4@$QUARTER" "$QUARTER" $(run_bulk "$WORK/q" 4)
  record "jobs-4@$HALF" "$HALF" $(run_bulk "$WORK/h" 4)
done

PROFILE=$(case "$BIN" in */release/*) echo release;; */debug/*) echo "DEBUG build: not the figure the target is about";; *) echo "profile unknown";; esac)
COMMIT=$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
python3 - "$WORK/results" "$WORK/index.json" "$OUT" "$N" "$KB" "$RUNS" "$PROFILE" "$COMMIT" "$CPU" "$(nproc)" "$BIN" <<'PYEOF'
import collections, datetime, json, statistics, sys
results, index, out, n, kb, runs, profile, commit, cpu, cores, binary = sys.argv[1:]
rows = collections.OrderedDict()
for line in open(results):
    label, samples, secs, rss, status, bad = line.split()
    rows.setdefault(label, []).append((int(samples), float(secs), int(rss), int(status), bad))

def figures(label):
    r = rows[label]
    secs = statistics.median(x[1] for x in r)
    return (r[0][0], secs, r[0][0] / secs, statistics.median(x[2] for x in r),
            sorted({x[3] for x in r}), sorted({x[4] for x in r}))

base = figures("per-process")[2]
kinds, verdicts = collections.Counter(), collections.Counter()
try:
    for s in json.load(open(index))["samples"]:
        t = s.get("type") or "?"
        kinds["ELF" if t.startswith("ELF") else "text" if "text" in t.lower() else t.split(",")[0][:40]] += 1
        verdicts[s.get("verdict") or s["status"]] += 1
except (OSError, ValueError):
    pass
o = ["# Bulk analysis: samples per second\n",
     f"`bench/bulk.sh` at {commit}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; binary "
     f"`{binary}` (**{profile}**); {cores} cores ({cpu}); no model (`--no-agent`), the built-in servers, "
     "the SQLite ledger.\n",
     f"Corpus: {n} third-party files of 1–100 KB ({int(kb) / 1024:.1f} MiB in all), unique by sha256, half from "
     "/usr/bin and /usr/lib, half from /usr/share/doc: "
     + ", ".join(f"{c} {k}" for k, c in kinds.most_common(8)) + "."]
if verdicts:
    o.append("Verdicts (heuristic): " + ", ".join(f"{c} {k}" for k, c in verdicts.most_common()) + ".")
o.append(f"\nEach figure is the median of {runs} runs, each on a fresh data directory, the modes interleaved run by "
         "run. One process per sample is `maljan analyze SAMPLE` once per file (its servers started each time) on "
         "every fourth file of the corpus; its rate is per sample, so it compares as is.\n")
o.append("| mode | samples | median s | samples/s | × one process per sample | median max RSS | exit status | not analysed |")
o.append("|---|---:|---:|---:|---:|---:|---|---|")
for label in rows:
    samples, secs, rate, rss, status, bad = figures(label)
    if label == "per-process":
        name = "one `maljan analyze` process per sample"
    else:
        j = label.split("-")[1].split("@")[0]
        name = f"`maljan analyze DIR --jobs {j}`"
    o.append(f"| {name} | {samples} | {secs:.2f} | {rate:.1f} | {rate / base:.1f}× | {rss / 1024:.0f} MiB | "
             f"{','.join(map(str, status))} | {','.join(bad)} |")
o.append("\nExit status 3 is a degraded run (a step failed on some sample, e.g. a member that could not be read); "
         "the reports are still whole. Max RSS is the largest single process of the command (`time -f %M`).\n")
o.append(f"Rerun: `cargo build --release -p maljan && bench/bulk.sh $CARGO_TARGET_DIR/release/maljan {n} {runs}`.\n")
open(out, "w").write("\n".join(o))
print("\n".join(o))
PYEOF
