#!/usr/bin/env bash
# The store suite: what the results store saves, a cold audit against a warm re-audit of the same command line
# (README.md here). Any machine with tileiras (the test extra installs it); no GPU.
#   bash benchmarks/store/run.sh OUT_DIR [ARGS of bench_store.py …]   (from the repository root)
set -uo pipefail
out=${1:?OUT_DIR}; shift
mkdir -p "$out"
python3 benchmarks/store/bench_store.py "$@" 2>&1 | tee "$out/bench_store.txt"
