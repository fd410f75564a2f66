#!/usr/bin/env bash
# CI: the compile, audit and record tests once per supported cuda-tile release (README, "cuda-tile versions").
#
# Each release gets its own venv: `cuda-tile==R` first, then the README's test install (`pip install -e
# ".[tileiras,test]"`), which keeps it (pyproject asks for cuda-tile>=1.5) and brings the compiler the tests pin
# (tileiras 13.4.92): the frontend varies, the compiler does not. The releases are tileprobe/_cutile.py's
# TESTED_RELEASES (read from the file, not imported); tests/test_cutile_api.py fails where the adapter's expectation
# of a release's private API is wrong.
#
# Usage: .ci/cuda_tile_matrix.sh [RELEASE ...]    (default: every tested release)
# Env:   MATRIX_VENVS (default /tmp): where the venvs go (tileprobe-ci-cuda-tile-R), rebuilt each run.
# Exit:  0 when every release passed, 1 otherwise (each release's line says how it went).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  releases=("$@")
else
  read -r -a releases <<< "$(python3 - <<'PY'
import ast
tree = ast.parse(open("tileprobe/_cutile.py", encoding="utf-8").read())
for node in tree.body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "TESTED_RELEASES" for t in node.targets):
        print(" ".join(ast.literal_eval(node.value)))
PY
)"
fi
[ ${#releases[@]} -gt 0 ] || { echo "cuda_tile_matrix: no releases (TESTED_RELEASES not found in tileprobe/_cutile.py)"; exit 1; }
# The compile, audit and record tests whose numbers do not depend on the frontend (a few minutes per release on 2
# cores): the adapter per release, compiles and their failures, the two reports' audits, recording programs.
TESTS=(tests/test_cutile_api.py tests/test_compile.py tests/test_failure_words.py tests/test_examples_audit.py
       tests/test_fixed_bytecode.py
       tests/test_record.py)
root=${MATRIX_VENVS:-/tmp}
summary=()
status=0
for r in "${releases[@]}"; do
  venv="$root/tileprobe-ci-cuda-tile-$r"
  start=$(date +%s)
  rm -rf "$venv"
  if ! { python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q --upgrade pip \
         && "$venv/bin/pip" install -q "cuda-tile==$r" && "$venv/bin/pip" install -q -e ".[tileiras,test]"; }; then
    summary+=("cuda-tile $r: install failed"); status=1; continue
  fi
  have=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("cuda-tile"))')
  if [ "$have" != "$r" ]; then
    summary+=("cuda-tile $r: the test install replaced it with $have"); status=1; continue
  fi
  echo "=== cuda-tile $r: ${TESTS[*]}"
  # -n auto: both cores; the two compile-pool timing tests (a deadline measured in wall seconds) run in the main
  # suite only, where the machine is not shared with a matrix venv's install.
  if "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=5 -n auto --dist loadfile "${TESTS[@]}" \
       -k "not at_the_cut and not first_wave_is_spared"; then
    summary+=("cuda-tile $r: passed ($(( $(date +%s) - start )) s with the install)")
  else
    summary+=("cuda-tile $r: FAILED ($(( $(date +%s) - start )) s with the install)"); status=1
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
