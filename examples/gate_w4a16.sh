#!/usr/bin/env bash
# The CI gate on the W4A16 GEMM of cutile-python #117 (examples/w4a16_gemm.py): with the activation gathered and the
# M-block loop at a runtime trip count, tileiras 13.4.92 ignores occupancy=2 on sm_120 (same machine code as
# occupancy=1: 384 threads x 168 registers, 1 CTA/SM) and 13.3.36 honours it (2 CTAs/SM).
#
#   examples/gate_w4a16.sh            # expects: 13.4.92 -> gate exits 1, 13.3.36 -> gate exits 0
#
# No GPU needed. --tileiras 13.3.36 uses a managed toolchain (installed on first use into the user cache dir, ~60 MB;
# `tileprobe toolchain list` shows what is installed). Results go to a throwaway store unless TILEPROBE_STORE is
# set; a second run reuses them and compiles nothing.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
STORE=${TILEPROBE_STORE:-$(mktemp -d)/gate-w4a16.sqlite}

gate() {
    "$PY" -m tileprobe.cli gate examples/w4a16_gemm.py --arch sm_120 --tileiras "$1" --store "$STORE" \
        --where "GATHER=True,LOOP=True,occupancy=2" \
        --expect "occupancy honoured" --expect "ctas_per_sm>=2"
}

echo "== tileiras 13.4.92: occupancy=2 is ignored, the gate must fail (exit 1)"
gate 13.4.92
rc_new=$?
echo "== tileiras 13.3.36: occupancy=2 is honoured, the gate must pass (exit 0)"
gate 13.3.36
rc_old=$?

echo "exit codes: 13.4.92 -> $rc_new (want 1), 13.3.36 -> $rc_old (want 0)"
[ "$rc_new" -eq 1 ] && [ "$rc_old" -eq 0 ]
