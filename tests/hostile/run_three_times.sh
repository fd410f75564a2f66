#!/bin/sh
# The containment ("hostile") suite three times in a row beside two CPU-bound processes (docs/FAILURES.md, "The
# start-up hook and the programs tileprobe starts"; the Done-when line "passes three times in a row beside two
# CPU-bound processes"). Heavy on a shared machine: run it once, by hand, from the repository root:
#     sh tests/hostile/run_three_times.sh            (PYTEST_ARGS="-n 2" by default)
# Prints each pass's exit status and wall time, and exits non-zero when any pass failed. The two `yes` processes
# are this script's own children and are killed by their PIDs at the end, whatever happened.
set -u
FILES="tests/test_hook_hostile.py tests/test_use_hostile.py tests/test_program_ownership.py
tests/test_zygote_hostile.py tests/test_contained_deadlines.py tests/test_compile_detached.py
tests/test_store_health.py tests/test_tracebacks_to_messages.py tests/test_exec_ray_leftovers.py
tests/test_no_orphans.py tests/test_hostile_echo.py tests/test_hostile_reads.py tests/test_hostile_inputs.py
tests/test_gpu_worker_dies_with_tileprobe.py tests/test_hostile_outputs_and_installs.py"
# Python may cache compiled modules: with PYTHONDONTWRITEBYTECODE set (this machine's shells have it) every one of the
# suite's hundreds of `python -m tileprobe` processes compiles tileprobe's modules from source again (`tune --refresh`:
# 0.55 s of CPU against 0.28 s with the cache, docs/LOG.md). The __pycache__ folders are ignored by git.
unset PYTHONDONTWRITEBYTECODE
yes > /dev/null & Y1=$!
yes > /dev/null & Y2=$!
trap 'kill "$Y1" "$Y2" 2>/dev/null' EXIT INT TERM
failed=0
for pass in 1 2 3; do
    t0=$(date +%s)
    # shellcheck disable=SC2086
    python -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:--n 2} $FILES > "${TMPDIR:-/tmp}/hostile-pass-$pass.log" 2>&1
    rc=$?
    echo "pass $pass: exit $rc, $(( $(date +%s) - t0 )) s, $(tail -n 1 "${TMPDIR:-/tmp}/hostile-pass-$pass.log")"
    [ "$rc" -eq 0 ] || failed=1
done
exit "$failed"
