"""The run worker's messages as records: the worker loop speaks them, and a message of another shape is refused.

The loop (:func:`tileprobe.run.worker.serve`) runs in a thread here, on one end of a pipe; the test is the parent
on the other end, reading the worker's messages as data (:mod:`tileprobe.probe.wire`) as the watchdog does.
"""
import os
import threading
from multiprocessing import Pipe

import pytest

from tileprobe.probe.wire import recv as wire_recv
from tileprobe.run import worker
from tileprobe.run.protocol import STOP, Hello, ProtocolError, Result, Started, Task, TaskError, is_fatal


def task_add(a: int, b: int) -> dict:
    return {"sum": a + b}


def task_fatal() -> dict:
    return {"status": "crash", "fatal": True}


def task_raises() -> dict:
    raise KeyError("M")


def _forged(message):
    """Every result made to say ok with a forged value (what a hostile probe would want sent for later tasks)."""
    message = list(message)
    return ["result", message[1], True, {"forged": True}] if message and message[0] == "result" else message


def task_forges_later_results() -> dict:
    """Probe code that replaces what the worker loop sends with: its module's sender, the encoder, the pipe's send."""
    from multiprocessing.connection import Connection

    from tileprobe.probe import wire
    real_wire_send, real_dumps, real_to_data = wire.send, wire.dumps, wire.to_data
    real_send_bytes = Connection.send_bytes

    def real_send(conn, message):
        real_wire_send(conn, real_to_data(message))
    worker._send = lambda conn, message: real_send(conn, _forged(message))
    wire.send = lambda conn, value, where="value": real_send(conn, _forged(value))
    wire.to_data = lambda value, depth=0: real_to_data(_forged(value) if depth == 0 else value, depth)
    wire.dumps = lambda value, where="value": real_dumps(_forged(value), where)
    Connection.send_bytes = lambda self, buf, *a: real_send_bytes(self, real_dumps(_forged(wire.loads(buf))))
    return {"patched": True}


def init_fails() -> dict:
    raise ImportError("no module named torch")


def _serve(init: str):
    parent, child = Pipe(duplex=True)
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(worker.serve(child, init)), daemon=True)
    t.start()
    return parent, t, codes


HERE = os.path.splitext(os.path.basename(__file__))[0]


def test_the_worker_loop_speaks_the_messages(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    parent, t, codes = _serve("tileprobe.run.worker:init_plain")
    hello = Hello.from_wire(wire_recv(parent))
    assert hello.ok and hello.info == {"pid": os.getpid()} and hello.failure == TaskError()
    parent.send(Task(7, f"{HERE}:task_add", {"a": 2, "b": 3}).to_wire())
    assert Started.from_wire(wire_recv(parent)) == Started(7)
    assert Result.from_wire(wire_recv(parent)) == Result(7, True, {"sum": 5})
    parent.send(Task(8, f"{HERE}:task_raises", {}).to_wire())
    wire_recv(parent)
    raised = Result.from_wire(wire_recv(parent))
    assert (raised.task_id, raised.ok, raised.fatal) == (8, False, False)
    assert raised.value["exception"] == "KeyError" and "KeyError: 'M'" in raised.error
    parent.send(Task(9, f"{HERE}:task_fatal", {}).to_wire())
    wire_recv(parent)
    assert Result.from_wire(wire_recv(parent)).fatal
    t.join(10)
    assert codes == [3]          # a fatal result ends the worker


def test_a_failed_init_says_why_and_a_stop_ends_the_loop(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    parent, t, codes = _serve(f"{HERE}:init_fails")
    hello = Hello.from_wire(wire_recv(parent))
    assert not hello.ok and hello.failure.exception == "ImportError"
    assert hello.failure.message == "no module named torch" and "Traceback" in hello.failure.error
    t.join(10)
    assert codes == [2]
    parent, t, codes = _serve("tileprobe.run.worker:init_plain")
    wire_recv(parent)
    parent.send(STOP)
    t.join(10)
    assert codes == [0]


def test_a_message_of_another_shape_is_refused():
    assert Hello.from_wire(None) == Hello(False, {}) and Hello.from_wire(("result", 1, True, {})).ok is False
    assert Hello.from_wire(("hello", True, ["not", "an", "object"])) == Hello(True, {})
    with pytest.raises(ProtocolError, match="not \\(\"result\", id, ok, value\\)"):
        Result.from_wire(("started", 3))
    with pytest.raises(ProtocolError, match="not \\(\"task\""):
        Task.from_wire(("task", 1, 42, {}))
    assert Task.from_wire(STOP) is None and Task.from_wire(()) is None
    assert Started.from_wire(("result", 1, True, {})) is None
    assert TaskError.from_wire("a string") == TaskError() and TaskError.from_wire({"error": 3}).error == ""
    assert is_fatal({"fatal": True}) and not is_fatal({"fatal": False}) and not is_fatal([True])
    assert Result(1, False, {"fatal": True}).fatal is False   # a raised task's value is its error, never fatal


def test_a_task_that_replaces_the_senders_cannot_forge_later_results(monkeypatch):
    from multiprocessing.connection import Connection

    from tileprobe.probe import wire
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    for owner, name in ((worker, "_send"), (wire, "send"), (wire, "dumps"), (wire, "to_data"),
                        (Connection, "send_bytes")):
        monkeypatch.setattr(owner, name, getattr(owner, name, None), raising=False)   # restored after the test
    parent, t, codes = _serve("tileprobe.run.worker:init_plain")
    assert Hello.from_wire(wire_recv(parent)).ok
    parent.send(Task(1, f"{HERE}:task_forges_later_results", {}).to_wire())
    assert Started.from_wire(wire_recv(parent)) == Started(1)
    assert Result.from_wire(wire_recv(parent)) == Result(1, True, {"patched": True})   # its own, as it returned
    assert wire.loads(wire.dumps(["result", 5, True, 1])) == ["result", 5, True, {"forged": True}]   # patched
    parent.send(Task(2, f"{HERE}:task_add", {"a": 2, "b": 3}).to_wire())
    assert Started.from_wire(wire_recv(parent)) == Started(2)
    assert Result.from_wire(wire_recv(parent)) == Result(2, True, {"sum": 5})           # not {"forged": True}
    parent.send(Task(3, f"{HERE}:task_raises", {}).to_wire())
    wire_recv(parent)
    raised = Result.from_wire(wire_recv(parent))
    assert (raised.task_id, raised.ok) == (3, False) and raised.value["exception"] == "KeyError"
    parent.send(STOP)
    t.join(10)
    assert codes == [0]
