"""Runners forked from a zygote (`autograder.forkserver`): as good as fresh, and nothing carries over.

Each test compares what student code observes in a forked runner with what
it observes in a fresh one, or lets one student attack the sandbox it
shares with the next and checks that the next one sees a clean sandbox.
"""
import json
import socket
import subprocess
import sys
import textwrap

import pytest

from autograder import forkserver, samples, sandbox, session
from autograder.session import StudentSession

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sandbox.probe().isolated,
                                                   reason="the fork server needs bubblewrap")]

# What a student can see of its process and its sandbox (the pids aside).
OBSERVE = textwrap.dedent("""
    import ctypes, json, os, sys
    def listing(path):
        return sorted(os.listdir(path))
    def others():  # pid 1: bwrap's init; pid 2: a fresh runner itself, or the zygote
        return [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, 2, os.getpid())]
    seen = json.dumps({
        "ppid": os.getppid(), "argv": sys.argv, "cwd": os.getcwd(), "scratch": listing("."),
        "home": listing(os.path.expanduser("~")), "tmp": listing("/tmp"),
        "mpl": {name: len(open("/tmp/mpl/" + name, "rb").read()) for name in listing("/tmp/mpl")},
        "shm": listing("/dev/shm"), "sysv": open("/proc/sysvipc/shm").read().splitlines()[1:],
        "others": others(), "fds": listing("/proc/self/fd"), "env": dict(os.environ),
        "names": sorted(k for k in globals() if not k.startswith("_")),
        "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
        "sid_is_own": os.getsid(0) == os.getpid(),
    }, sort_keys=True)
""")
FIRST_CELL = "import torch\nimport torch.nn.functional as F\nimport matplotlib.pyplot as plt"
RANDOM = "import random, numpy\nrandoms = [random.random(), float(numpy.random.rand()), float(torch.rand(()))]"


@pytest.fixture
def server():
    srv = forkserver.ForkServer(reply_timeout=3.0)
    forkserver.install(srv)
    yield srv
    forkserver.uninstall(srv)


def _observe(cells):
    with StudentSession(cells) as s:
        s.run_notebook()
        forked = isinstance(s.proc, forkserver.ForkedRunner)
        return forked, json.loads(s.get("seen")), s.get("randoms")


def test_a_forked_runner_looks_like_a_fresh_one(server):
    cells = [FIRST_CELL, "import matplotlib\nplt.plot([1, 2]); plt.title('注意力')", RANDOM, OBSERVE]
    forked_a, seen_a, randoms_a = _observe(cells)
    forked_b, seen_b, randoms_b = _observe(cells)
    forkserver.uninstall(server)
    fresh, seen_fresh, randoms_fresh = _observe(cells)
    assert (forked_a, forked_b, fresh) == (True, True, False)
    assert server.handed == 2 and server.zygotes == 1
    assert seen_a == seen_b == seen_fresh
    assert seen_fresh["ppid"] == 1 and seen_fresh["others"] == []
    # Each process seeds its global RNGs from the OS, forked or not.
    assert len({tuple(randoms_a), tuple(randoms_b), tuple(randoms_fresh)}) == 3


def test_nothing_of_one_student_reaches_the_next(server):
    traces = next(s for s in samples.ATTACKS if s.name == "attack-leave-traces").append[0]
    with StudentSession([FIRST_CELL, traces, "import os\nos.environ['LEFT'] = '1'\nplanted = 1"]) as a:
        outputs = a.run_notebook()
        assert all(o["output_type"] != "error" for out in outputs.values() for o in out), outputs
        assert isinstance(a.proc, forkserver.ForkedRunner)
    # The next student: clean sandbox, and a runner that is not killed by what the last one left.
    cells = [FIRST_CELL, "import time\ntime.sleep(0.5)\nimport statistics, fractions", OBSERVE]
    forked, seen, _ = _observe(cells)
    forkserver.uninstall(server)
    fresh, seen_fresh, _ = _observe(cells)
    assert forked and not fresh
    assert seen == seen_fresh, {k: (seen[k], seen_fresh[k]) for k in seen if seen[k] != seen_fresh[k]}
    assert "planted.txt" not in seen["scratch"] + seen["tmp"] + seen["shm"] and seen["sysv"] == []


def test_the_zygote_is_out_of_reach_of_its_runners(server):
    probe = textwrap.dedent("""
        import ctypes, os
        zygote = next(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid()))
        refused = []
        for what in ("mem", "environ", "fd"):
            try:
                (os.listdir if what == "fd" else open)(f"/proc/{zygote}/{what}")
            except PermissionError:
                refused.append(what)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, zygote, None, None) == -1:  # PTRACE_ATTACH
            refused.append("ptrace")
        if libc.syscall(434, zygote, 0) >= 0:  # pidfd_open works; pidfd_getfd must not
            fd = libc.syscall(434, zygote, 0)
            if libc.syscall(438, fd, 0, 0) == -1:
                refused.append("pidfd_getfd")
    """)
    with StudentSession([probe]) as s:
        s.run_notebook()
        assert s.get("refused") == ["mem", "environ", "fd", "ptrace", "pidfd_getfd"]


def test_a_stopped_or_killed_zygote_is_replaced(server):
    stop_others = next(s for s in samples.ATTACKS if s.name == "attack-stop-everyone-else").append[0]
    with StudentSession([stop_others, "after = 1"]) as a:
        a.run_notebook()
        assert a.get("after") == 1  # stopping the zygote does not hurt the runner itself
    # pid 2 is a fresh runner itself, or the zygote: the sandbox dies with it, a moment later.
    killer = "import os, signal, time\nos.kill(2, signal.SIGKILL)\ntime.sleep(20)"
    with StudentSession(["x = 1", killer, "y = 2"]) as b:
        outputs = b.run_notebook()
        assert outputs[1][0]["ename"] == "KernelDied"
        assert (b.get("x"), b.get("y")) == (1, 2)  # restarted, the earlier cells replayed
    forked, seen, _ = _observe([OBSERVE])
    assert forked and seen["others"] == [] and server.zygotes == 3


def test_a_session_never_shares_the_sandbox_with_another(server):
    with StudentSession(["a = 1"]) as first, StudentSession(["b = 2"]) as second:
        first.run_notebook()
        second.run_notebook()
        assert isinstance(first.proc, forkserver.ForkedRunner)
        assert not isinstance(second.proc, forkserver.ForkedRunner)  # a fresh runner instead
        assert (first.get("a"), second.get("b")) == (1, 2) and server.missed == 1


def test_the_zygote_refuses_to_run_outside_its_own_pid_namespace(tmp_path):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.run([sys.executable, "-I", str(forkserver.ZYGOTE)], stdin=theirs.fileno(),
                          cwd=tmp_path, capture_output=True, timeout=60)
    theirs.close()
    ours.settimeout(5)
    assert json.loads(ours.recv(4096))["op"] == "refused" and proc.returncode == 2


def test_grading_uses_fresh_runners_when_the_zygote_cannot_start(monkeypatch):
    monkeypatch.setattr(forkserver, "ZYGOTE", forkserver.ZYGOTE.with_name("no-such-zygote.py"))
    srv = forkserver.ForkServer(start_timeout=20)
    forkserver.install(srv)
    try:
        with StudentSession(["z = 3"]) as s:
            s.run_notebook()
            assert s.get("z") == 3 and not isinstance(s.proc, forkserver.ForkedRunner)
    finally:
        forkserver.uninstall(srv)
    assert srv.missed == 1 and srv.handed == 0


def test_sessions_stop_forked_runners_through_the_zygote(server):
    with StudentSession(["import time\nwhile True:\n    time.sleep(0.01)", "after = 1"],
                        budget=session.Budget(cell_timeout=1.0)) as s:
        outputs = s.run_notebook()
        assert outputs[0][0]["ename"] == "CellTimeoutError" and s.get("after") == 1
    forked, seen, _ = _observe([OBSERVE])
    assert forked and seen["others"] == [] and server.zygotes == 1 and server.handed == 3
