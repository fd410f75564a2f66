"""The kept-warm server's messages as records: their JSON objects, and what a client makes of a server's message
of another shape (it goes on with a worker of its own, told why)."""
import socket
import threading

import pytest

from tileprobe.jsonrecord import FieldError
from tileprobe.probe import wire
from tileprobe.run import keepwarm
from tileprobe.run.warmserver import recv_msg, send_msg
from tileprobe.run.warmwire import STOP, ClientHello, Outcome, ServerHello, TaskRequest, op_of


def test_the_messages_keep_their_json_objects():
    assert ClientHello({"python": "3.12"}).to_wire() == {"op": "hello", "provenance": {"python": "3.12"}}
    hello = ServerHello(True, "", 41, 600.0, {"python": "3.12"}, {"name": "H100"}, 42)
    assert list(hello.to_wire()) == ["op", "ok", "why", "pid", "idle_s", "provenance", "info", "worker_pid"]
    assert ServerHello.from_wire(wire.loads(wire.dumps(hello.to_wire()))) == hello
    assert TaskRequest("m:f", {}, 5.0).to_wire() == {"op": "task", "fn": "m:f", "kwargs": {}, "timeout_s": 5.0}
    out = Outcome("done", {"grid": (64, 1, 1)}, "", 0.25, 7, None, 1, {"name": "H100"})
    sent = wire.loads(wire.dumps(out.to_wire()))
    assert list(sent) == ["op", "status", "value", "error", "wall_s", "worker_pid", "exit_status", "restarts", "info"]
    assert Outcome.from_wire(sent) == out and Outcome.from_wire(sent).value["grid"] == (64, 1, 1)  # a tuple stays
    assert op_of(STOP) == "stop" and op_of(["stop"]) is None and op_of({"op": 3}) is None


def test_a_task_that_cannot_run_names_its_problem():
    assert TaskRequest.from_wire({"op": "task", "fn": "m:f", "timeout_s": 5}) == TaskRequest("m:f", {}, 5.0)
    assert TaskRequest.from_wire({"fn": "", "timeout_s": 5}) == "'fn' is not a function name"
    assert TaskRequest.from_wire({"fn": "m:f", "kwargs": [1], "timeout_s": 5}) == "'kwargs' is not an object"
    assert TaskRequest.from_wire({"fn": "m:f", "timeout_s": True}).startswith("'timeout_s' is not a finite")
    assert ClientHello.from_wire({"op": "hello", "provenance": [1]}) == ClientHello({})
    assert ClientHello.from_wire({"op": "task"}) is None


def test_a_server_message_of_another_shape_is_refused_by_field():
    with pytest.raises(FieldError, match=r"the kept-warm server's outcome: Outcome.restarts holds 'two'"):
        Outcome.from_wire({"op": "outcome", "status": "done", "restarts": "two"})
    with pytest.raises(FieldError, match="lacks its field 'status'"):
        Outcome.from_wire({"op": "outcome"})
    assert ServerHello.from_wire({"op": "outcome", "status": "done"}) is None


@pytest.mark.parametrize("reply, words", [
    ({"op": "hello", "ok": True, "pid": "forty-one"}, "a hello that does not fit: the kept-warm server's hello: "
                                                      "ServerHello.pid holds 'forty-one'"),
    ({"op": "outcome", "status": "done"}, "something that is not a hello"),
])
def test_a_client_refuses_a_hello_of_another_shape(reply, words):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def server():
        recv_msg(theirs)
        send_msg(theirs, reply)
    t = threading.Thread(target=server, daemon=True)
    t.start()
    try:
        with pytest.raises(keepwarm.KeepWarmRefused, match=words):
            keepwarm._hello(ours, {}, 10.0)
    finally:
        t.join(10)
        ours.close()
        theirs.close()
