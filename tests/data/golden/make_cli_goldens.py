"""Golden outputs of the ``tileprobe`` CLI (the refactor into packages must not change what any command
prints, nor how a JSON file or store written before it reads).

Written at commit 041030c (before f6a19df moved the modules into packages), on the 2-core CPU machine with the pip
tileiras 13.4.92 and the managed 13.3.36, by::

    git -C /work/main worktree add --detach /work/wt/golden-old 041030c
    python tests/data/golden/make_cli_goldens.py --code /work/wt/golden-old     # about 50 s

(``cli/inputs/two_release_run.json`` was written by that code too, and is kept when the goldens are made again.)
``usage_errors`` and ``tune_dry_run`` were made again on branch cli-polish (2026-12-02) for two intended changes:
``sass`` without ``--where`` is a usage error (exit 2), and a tune with nothing to compile names that time
"reading the store"; ``tune_dry_run`` again in session 5 (2026-12-02): a dry run says "not raced" instead of
listing why the others were not timed; ``tune_dry_run`` again in session 8 (2026-12-03): the tune's table is fitted
to the terminal as the audit's (columns dropped in a set order and named under it, instead of cut mid-cell);
``tune_dry_run`` again in session 9 (2026-12-03): with nothing timed the race's columns (all "-") are dropped
before grid, CTAs/SM and stack. ``audit_warm_json``, ``gate`` and ``history_fresh`` on branch h4 (2026-12-05): the
register-pool model's version is 2 (it reads the sm_100/sm_120 add spellings), their only change;
``compare_files``, ``compare_files_markdown`` and ``compare_releases`` too: the variants that only changed are one
line per kind of change (``instructions: 2 variants, +18 (80 → 98)``) instead of a line each; ``audit_cold``,
``audit_warm``, ``audit_warm_markdown``, ``audit_warm_summary_where``, ``audit_failures`` and ``compare_releases``
(h4, 2026-12-05): the audit's code-size column (``instr``), the shared-memory column's note, the Markdown report's
relative probe paths, one line per compiler and the verdict legend (``audit_cold`` without the progress line a slow
machine adds).
``compare_files``, ``compare_files_markdown``, ``compare_schema1``, ``compare_releases`` and ``tune_dry_run`` again
(2026-12-05, with this file's cases on main): compare names each side's cuda-tile and says which side differs, and a
tune's JSON carries the race's kernel time (``kernel_s``).
``audit_warm_json``, ``gate``, ``history_fresh``, ``audit_failures``, ``audit_warm_markdown``,
``audit_warm_summary_where`` and ``compare_releases`` on branch h5 (2026-12-05): records keep the SASS base opcodes
(``sass.opcodes``), ``audit --json`` the pruned occupancy space (``pruned_space``), the Markdown report the kernel's
source (``### The kernel``) and compare the instruction families added or dropped.
``audit_warm_json``, ``gate``, ``history_fresh`` and
``compare_releases`` on branch h8 (2026-12-05): records carry the bytecode tileiras was given (``bytecode``,
``bytecode_sha256``), and compare says the bytecode changed with the compiler (13.3 → 13.4).
``history_fresh`` again (2026-12-05, session 16): compiles start longest-first (``tileprobe/compile/order.py``), so
the cold audit's TILE=1024 variants are stored before its TILE=256 ones and ``history`` (newest first) lists them
after; the rows are otherwise the same. ``history_fresh`` and ``history_schema2_csv`` again (2026-12-06, session 17):
``history --csv`` has a ``failure`` column after ``status`` (the failure class the audit names), its only change.

``--code DIR`` is the tileprobe source tree the commands run with (``PYTHONPATH=DIR``); the cases, the inputs and
the normalizer are this file's, so ``tests/test_golden_cli.py`` runs the very same commands on the current code
and compares. Each ``cli/<case>.txt`` holds, per command of the case, ``$ tileprobe …``, its stdout, its stderr and
its exit code.

Every command runs in :data:`WORK` (a fixed path: tileiras writes the kernel file's path into the cubin's line
info, so the cubin hashes are the same only for the same path; a lock file keeps two runs apart), with
``COLUMNS=120``, ``TZ=UTC``, ``PYTHONHASHSEED=0``, ``TMPDIR``, ``XDG_CACHE_HOME`` and ``TILEPROBE_STORE`` inside
it, and no other ``TILEPROBE_*`` setting but the managed toolchains' folder. What legitimately varies between runs is
replaced by :func:`normalize`, the one function both the generator and the test apply; everything else must match
byte for byte.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

GENERATED_AT = "041030c"
ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"
GOLDEN = Path(__file__).resolve().parent / "cli"
WORK = Path("/tmp/tileprobe-golden-cli")
TOOLCHAINS = Path(os.environ.get("TILEPROBE_TOOLCHAINS")
                  or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tileprobe" / "toolchains")
PROBE = "probes/probe_vadd.py"
#: The audit every "fresh" case starts from: its output is the golden ``audit_cold``; ``--jobs 1`` so the store's
#: compiles are made (and listed by ``history``) in one order.
COLD_AUDIT = ["audit", PROBE, "--arch", "sm_90", "--store", "fresh.sqlite", "--jobs", "1"]
B135 = "Cuda compilation tools, release 13.5, V13.5.37"


@dataclass(frozen=True)
class Case:
    """Commands run in order in :data:`WORK` (``{S}``: this case's copy of its store) and whether their output is
    about compiles made in this run (``fresh``: times, the host and the remarks' order vary) or only about files
    fixed in the repository."""
    commands: tuple[tuple[str, ...], ...]
    store: str | None = None          # "schema2", "schema1" (tests/data), "fresh" (COLD_AUDIT's) or "empty" (none yet)
    needs: str = "13.4.92"            # "13.3.36": the managed toolchain too
    fresh: bool = False


def _c(*commands: str, store: str | None = None, needs: str = "13.4.92", fresh: bool | None = None) -> Case:
    fresh = store in ("fresh", "empty") if fresh is None else fresh
    return Case(tuple(tuple(shlex.split(c)) for c in commands), store, needs, fresh)


AUDIT = f"audit {PROBE} --arch sm_90 --store {{S}}"
CASES: dict[str, Case] = {
    # --- stores written by older tileprobe (opening migrates them), history tables and exports ---------------------
    "history_schema2": _c("history --store {S}", "store --store {S} size", store="schema2"),
    "history_schema2_json": _c("history --store {S} --json -", store="schema2"),
    "history_schema2_csv": _c("history --store {S} --csv -", store="schema2"),
    "history_schema1": _c("history --store {S} --limit 0", "history --store {S} --where occupancy=2 --arch sm_90",
                          store="schema1"),
    "history_schema1_json": _c("history --store {S} --json - --where opt_level=3", store="schema1"),
    # --- compare of result JSON files --------------------------------------------------------------------------------
    "compare_files": _c("compare data/a.json data/b.json", "compare data/a.json data/b.json --regressions --wide"),
    "compare_files_markdown": _c("compare data/a.json data/b.json --format markdown"),
    "compare_files_json": _c("compare data/a.json data/b.json --json - --format none --where ALLOW_TMA=True"),
    "compare_schema1": _c("compare data/schema1_audit.json data/examples_records_2026-12-01.json"),
    "compare_runs": _c("compare data/two_release_run.json", "compare data/two_release_run.json --format markdown",
                       "compare data/two_release_run.json --wide --json -"),
    # --- audits, and the commands that read the store they wrote ----------------------------------------------------
    "audit_warm_json": _c(f"{AUDIT} --json -", store="fresh"),
    "audit_warm": _c(AUDIT, f"{AUDIT} --brief --wide", store="fresh"),
    "audit_warm_markdown": _c(f"{AUDIT} --format markdown", store="fresh"),
    "audit_warm_summary_where": _c(f"{AUDIT} --summary", f"{AUDIT} --where TILE=1024 --brief",
                                   f"{AUDIT} --where TILE=256,occupancy=2 --format markdown", store="fresh"),
    "history_fresh": _c("history --store {S} --json -", "history --store {S} --csv -", store="fresh"),
    "sass": _c(f"sass {PROBE} --arch sm_90 --store {{S}} --where TILE=256,occupancy=1",
               f"sass {PROBE} --arch sm_90 --store {{S}} --where TILE=256,occupancy=1 --diff TILE=1024", store="fresh"),
    "tune_dry_run": _c(f"tune {PROBE} --dry-run --arch sm_90 --num-sms 132 --store {{S}} --jobs 1",
                       f"tune {PROBE} --dry-run --arch sm_90 --num-sms 132 --store {{S}} --json - --format none",
                       store="fresh"),
    "gate": _c(f"gate {PROBE} --arch sm_90 --store {{S}} --expect 'occupancy honoured' --expect ctas_per_sm>=2",
               f"gate {PROBE} --arch sm_90 --store {{S}} --where TILE=1024 --expect registers<=20 --expect 'no spills' "
               "--json -", store="fresh"),
    "audit_failures": _c("audit probes/probe_failures.py --arch sm_90,sm_75 --store {S}",
                         "audit probes/probe_failures.py --arch sm_90 --store {S} --strict --format markdown",
                         store="empty"),
    "audit_probe_errors": _c("audit probes/probe_broken.py probes/probe_typo.py --arch sm_90 --no-store", fresh=True),
    "usage_errors": _c(f"{AUDIT} --where TILE=512", f"sass {PROBE} --arch sm_90 --store {{S}}",
                       f"{AUDIT} --hint occupancy=1,x", f"{AUDIT} --case TILE=", "history --store {S} --where bogus=1",
                       store="fresh"),
    "compare_store_audits": _c(f"{AUDIT} --format none --where TILE=256", "compare 1 2 --store {S}", store="fresh"),
    "compare_releases": _c(f"compare --probe {PROBE} --tileiras 13.3.36,13.4.92 --arch sm_90 --store {{S}} "
                           "--where TILE=256",
                           f"compare --probe {PROBE} --tileiras 13.3.36,13.4.92 --arch sm_90 --store {{S}} "
                           "--where TILE=256 --format markdown --tables",
                           store="fresh", needs="13.3.36"),
}


# --- the normalizer ---------------------------------------------------------------------------------------------------

def normalize(text: str, fresh: bool) -> str:
    """``text`` with what varies between runs replaced by placeholders: this machine's paths (the work folder,
    temp names, the Python prefix, the toolchains folder) and platform string, where a Python warning was raised
    (the code's file and line, and its source line), a JSON document's time of writing; with ``fresh`` (outputs
    about compiles made in this run) also timestamps, durations, the host and the order of each record's compiler
    remarks (tileiras varies it). Nothing else is touched."""
    text = text.replace(str(WORK), "<W>").replace(str(TOOLCHAINS), "<TOOLCHAINS>")
    text = text.replace(sys.prefix, "<PREFIX>").replace(platform.platform(), "<platform>")
    text = re.sub(r"<W>/tmp/[^\s\"',;)]*", lambda m: "<W>/tmp/<temp>" + re.sub(r"^[^.]*", "",
                                                                              m.group().rsplit("/", 1)[-1]), text)
    # warnings.warn's "FILE:LINE: Category: message" and the source line after it name the code, not the output
    text = re.sub(r"^\S+\.py:\d+: (\w+Warning): (.*)\n  .*\n", r"<code>: \1: \2\n", text, flags=re.M)
    # a JSON document's own "created" (the time it was written: seconds, no fraction; stored rows have one)
    text = re.sub(r'"created": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"', '"created": "<now>"', text)
    if not fresh:
        return text
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<time>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "YYYY-MM-DD hh:mm:ss", text)
    text = re.sub(r'"(\w+_s|host)": ("[^"]*"|[-+.\deE]+)', r'"\1": "<v>"', text)
    text = re.sub(r"\b\d+\.\d{5,}(e-?\d+)?\b", "<float>", text)            # CSV compile_s
    text = re.sub(r"\b\d+\.\d+( s\b|s\))", r"<t>\1", text)                  # "5.2 s", "(0.2s)"
    text = re.sub(rf",{re.escape(socket.gethostname())},", ",<host>,", text)
    # the compile stage's plain progress lines come only when compiling took longer than 10 s: on a loaded machine
    # (tests in parallel) and not on an idle one, so they are not part of what is compared
    text = re.sub(r"^(tileiras \S+: )?compiled \d+/\d+ \w+( \(\d+ failed\))?, \d+ s\n", "", text, flags=re.M)
    return _sorted_remarks(text)


def _sorted_remarks(text: str) -> str:
    """Each ``"remarks": [ … ]`` list of an indented JSON document, its items in sorted order."""
    def sort(m: re.Match) -> str:
        items = re.split(rf"(?<=\}}),\n(?={m.group(1)} \{{)", m.group(2))
        return f'{m.group(1)}"remarks": [\n' + ",\n".join(sorted(items)) + f"\n{m.group(1)}]"
    return re.sub(r'^( *)"remarks": \[\n(.*?)\n\1\]', sort, text, flags=re.M | re.S)


# --- inputs -----------------------------------------------------------------------------------------------------------

def compare_inputs(out: Path) -> None:
    """``a.json``: rms_norm_large and w4a16_gemm on sm_90 from the bundled examples' records; ``b.json``: the same as
    a made-up tileiras 13.5.37 built them, with a few changes a release brings (lost residency and new spills, spills
    gone, other TMA instructions, a variant missing)."""
    doc = json.loads((DATA / "examples_records_2026-12-01.json").read_text(encoding="utf-8"))
    a = [v for v in doc["variants"] if v["kernel"] in ("rms_norm_large", "w4a16_gemm") and v["arch"] == "sm_90"]
    b = json.loads(json.dumps(a))
    for v in b:
        v["tileiras"] = B135
        key = (v["kernel"], json.dumps(v["case"], sort_keys=True), v["hints"].get("occupancy"))
        if key == ("rms_norm_large", '{"ALLOW_TMA": true}', 2):
            v.update(registers=168, threads=384, ctas_per_sm=1, warps_per_sm=12, occupancy_pct=18.75,
                     stack_bytes=32, code_sha256="b2b2b2b2b2b2b2b2")
            v["sass"].update(spill_loads=4, spill_stores=2)
        elif key == ("rms_norm_large", '{"ALLOW_TMA": true}', 1):
            v.update(stack_bytes=0, registers=248, code_sha256="b1b1b1b1b1b1b1b1")
            v["sass"].update(spill_loads=0, spill_stores=0)
        elif key == ("rms_norm_large", '{"ALLOW_TMA": false}', 4):
            v["sass"]["tma"] = {}
            v["code_sha256"] = "b4b4b4b4b4b4b4b4"
    b = [v for v in b if not (v["kernel"] == "rms_norm_large" and v["hints"].get("occupancy") == 16
                              and v["case"] == {"ALLOW_TMA": False})]
    out.mkdir(parents=True, exist_ok=True)
    for name, variants, build in (("a.json", a, doc["environment"]["tileiras"][0]), ("b.json", b, B135)):
        side = dict(doc, variants=variants, environment=dict(doc["environment"], tileiras=[build]))
        (out / name).write_text(json.dumps(side, indent=1) + "\n", encoding="utf-8")


def write_run_input(code: Path, out: Path) -> None:
    """``out/two_release_run.json``: the two-release run JSON of tests/test_release_runs.py (GPU timings, a new hang),
    as the code at ``code`` writes it. Written once, at :data:`GENERATED_AT`, and kept: a file of that tileprobe that
    later code must read as it did (an existing one is left as it is)."""
    if (out / "two_release_run.json").exists():
        return
    script = ("import sys, pathlib; sys.path.insert(0, sys.argv[1]); import test_release_runs as t; "
              "print(t._two_release_run(pathlib.Path(sys.argv[2])))")
    subprocess.run([sys.executable, "-c", script, str(code / "tests"), str(out)], check=True,
                   env=dict(os.environ, PYTHONPATH=str(code)), stdout=subprocess.DEVNULL)
    (out / "run.json").rename(out / "two_release_run.json")


# --- running ----------------------------------------------------------------------------------------------------------

def environment(code: Path) -> dict[str, str]:
    """The commands' environment: this one without TILEPROBE_* settings, with the fixed ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEPROBE_")}
    env.update(PYTHONPATH=str(code), COLUMNS="120", LINES="50", TZ="UTC", PYTHONHASHSEED="0",
               TMPDIR=str(WORK / "tmp"), XDG_CACHE_HOME=str(WORK / "xdg"), TILEPROBE_STORE=str(WORK / "default.sqlite"),
               TILEPROBE_TOOLCHAINS=str(TOOLCHAINS))
    env.pop("NO_COLOR", None)
    env.pop("FORCE_COLOR", None)
    return env


def run_commands(code: Path, commands, fresh: bool, store: Path | None = None) -> str:
    """The normalized transcript of ``commands`` run one after the other in :data:`WORK`."""
    out = []
    for argv in commands:
        argv = [a.replace("{S}", str(store.relative_to(WORK))) if store else a for a in argv]
        p = subprocess.run([sys.executable, "-m", "tileprobe", *argv], cwd=WORK, env=environment(code),
                           capture_output=True, text=True, timeout=600)
        out.append(f"$ tileprobe {shlex.join(argv)}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}"
                   f"--- exit {p.returncode}\n")
    return normalize("".join(out), fresh)


@contextlib.contextmanager
def work_folder(code: Path, inputs: Path):
    """:data:`WORK`, made afresh and held (a lock file) until the block ends: the probe, the data files, the
    stores, and the fresh store of :data:`COLD_AUDIT`; yields that audit's transcript."""
    with open(str(WORK) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            shutil.rmtree(WORK, ignore_errors=True)
            for sub in ("probes", "data", "tmp", "xdg", "cases"):
                (WORK / sub).mkdir(parents=True)
            for name in ("probe_vadd.py", "simple_kernels.py", "probe_failures.py"):
                shutil.copy(DATA / name, WORK / "probes" / name)
            for name in ("probe_broken.py", "probe_typo.py"):
                shutil.copy(inputs / name, WORK / "probes" / name)
            for name in ("schema1_audit.json", "examples_records_2026-12-01.json", "schema1_store.sqlite"):
                shutil.copy(DATA / name, WORK / "data" / name)
            shutil.copy(DATA / "stores" / "schema2.sqlite", WORK / "data" / "schema2.sqlite")
            shutil.copy(inputs / "two_release_run.json", WORK / "data" / "two_release_run.json")
            compare_inputs(WORK / "data")
            yield run_commands(code, [COLD_AUDIT], fresh=True)
        finally:
            shutil.rmtree(WORK, ignore_errors=True)
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_case(code: Path, name: str) -> str:
    """Case ``name``'s transcript, on its own copy of its store (inside :func:`work_folder`)."""
    case = CASES[name]
    store = None
    if case.store:
        src = {"schema2": WORK / "data" / "schema2.sqlite", "schema1": WORK / "data" / "schema1_store.sqlite",
               "fresh": WORK / "fresh.sqlite", "empty": None}[case.store]
        store = WORK / "cases" / name / "store.sqlite"
        store.parent.mkdir(parents=True)
        if src:
            shutil.copy(src, store)
    return run_commands(code, case.commands, case.fresh, store)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, required=True, help=f"the tileprobe tree to run (commit {GENERATED_AT})")
    ap.add_argument("--out", type=Path, default=GOLDEN)
    args = ap.parse_args()
    inputs = args.out / "inputs"
    if args.out.resolve() != GOLDEN:
        shutil.copytree(GOLDEN / "inputs", inputs, dirs_exist_ok=True)     # the probes, and the run JSON kept there
    inputs.mkdir(parents=True, exist_ok=True)
    write_run_input(args.code.resolve(), inputs)
    with work_folder(args.code.resolve(), inputs) as cold:
        (args.out / "audit_cold.txt").write_text(cold, encoding="utf-8")
        for name in CASES:
            t0 = time.monotonic()
            (args.out / f"{name}.txt").write_text(run_case(args.code.resolve(), name), encoding="utf-8")
            print(f"{name} {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
