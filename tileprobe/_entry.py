"""The ``tileprobe`` console command's entry point: :func:`tileprobe.cli.main`, imported here so that Ctrl-C while
the CLI's modules load (about 0.5 s: argparse, rich, the command modules) ends with exit 130 and one line, as Ctrl-C
later does, not with a traceback. (Ctrl-C in the interpreter's own start, before this module runs, is Python's.)"""
import sys


def main() -> int:
    """Import and run the CLI (:func:`tileprobe.cli.main`); returns its exit code, 130
    (:data:`tileprobe.errors.EXIT_INTERRUPTED`) on Ctrl-C during the import."""
    try:
        if len(sys.argv) > 1 and sys.argv[1] in ("tune", "audit") and not {"-h", "--help"} & set(sys.argv[2:]):
            from tileprobe.probe.zygote import start_early
            start_early()          # its imports beside the CLI's
        from tileprobe.run.early import wants_early_worker
        if wants_early_worker(sys.argv[1:]):   # the tune's GPU worker (torch, a CUDA context) starts now, beside the
            from tileprobe.run.early import start_early_worker  # CLI's start-up, the plan and the compiles
            start_early_worker()
        from tileprobe.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return cli_main()
