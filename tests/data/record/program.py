"""A program that launches cuTile kernels (under tests/data/record/fake_launch), for tests/test_record.py.

    python program.py basic | crash-exc | crash-kill | many | child
"""
import os
import signal
import subprocess
import sys

from cuda.tile import launch   # taken when the program starts, before any launch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernels as k   # noqa: E402


def basic():
    import cuda.tile as ct
    for _ in range(5):
        launch(None, (16,), k.vadd, k.vadd_args(4096))                         # 256-B-aligned bases
    launch(None, (32,), k.vadd, k.vadd_args(8192))                             # same signature as above
    launch(None, (16,), k.vadd, k.vadd_args(4100, align_offset=8))             # another signature (8-B base)
    ct.launch(None, (16,), k.vadd.replace_hints(occupancy=4), k.vadd_args(4096))
    ct.launch(None, (32,), k.scale_rows, k.scale_args())
    runtime = ct.kernel(k.copy_fn, occupancy=2)
    ct.launch(None, (8,), runtime, k.vadd_args(2048)[:2] + (256,))
    rc = subprocess.run([sys.executable, os.path.abspath(__file__), "child"]).returncode
    print(f"result: {sum(range(10))} child={rc}")


def child():
    for _ in range(3):
        launch(None, (4,), k.vadd, k.vadd_args(1024, tile=128))


def many():
    # 40 shapes of distinct divisibility classes... and frequencies 1..40
    for i in range(1, 41):
        for _ in range(i):
            launch(None, (1,), k.vadd, k.vadd_args(1024 * i + i % 3, tile=128))


def crash_exc():
    for _ in range(4):
        launch(None, (16,), k.vadd, k.vadd_args(4096))
    raise RuntimeError("the program fails after launching")


def crash_kill():
    for _ in range(4):
        launch(None, (16,), k.vadd, k.vadd_args(4096))
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    {"basic": basic, "child": child, "many": many, "crash-exc": crash_exc, "crash-kill": crash_kill}[sys.argv[1]]()
