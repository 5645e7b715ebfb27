"""Runners forked from a zygote (`autograder.sandbox.forkserver`): as good as fresh, and nothing carries over.

Each test compares what student code observes in a forked runner with what
it observes in a fresh one, or lets one student attack the sandbox it
shares with the next and checks that the next one sees a clean sandbox.
"""
import errno
import gc
import json
import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import catalogue
from autograder.sandbox import forkserver, launcher, runners, session
from autograder.sandbox.guest import ZYGOTE
from autograder.sandbox.session import StudentSession

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not launcher.probe().isolated,
                                                   reason="the fork server needs bubblewrap")]

# What a student can see of its process and its sandbox (the pids aside).
OBSERVE = textwrap.dedent("""
    import ctypes, gc, hashlib, json, os, re, sys
    def listing(path):
        return sorted(os.listdir(path))
    def may_signal(pid):
        try:
            os.kill(pid, 0)
            return "allowed"
        except OSError as exc:
            return type(exc).__name__
    def others():  # pid 1: bwrap's init; pid 2: the zygote, or what forked a fresh runner
        return [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, 2, os.getpid())]
    seen = json.dumps({
        "ppid": os.getppid(), "argv": sys.argv, "cwd": os.getcwd(), "scratch": listing("."),
        "home": listing(os.path.expanduser("~")), "tmp": listing("/tmp"),
        "mpl": {name: len(open("/tmp/mpl/" + name, "rb").read()) for name in listing("/tmp/mpl")},
        "shm": listing("/dev/shm"),
        "tmp_mine": sorted(os.path.relpath(os.path.join(r, n), "/tmp") for r, ds, fs in os.walk("/tmp")
                           for n in ds + fs if os.lstat(os.path.join(r, n)).st_uid == os.getuid()),
        "sysv": open("/proc/sysvipc/shm").read().splitlines()[1:],
        "others": others(), "fds": listing("/proc/self/fd"), "env": dict(os.environ),
        "names": sorted(k for k in globals() if not k.startswith("_")),
        "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
        "sid_is_own": os.getsid(0) == os.getpid(),
        "main": getattr(sys.modules["__main__"], "__file__", None), "orig_argv": sys.orig_argv[1:],
        "guest": listing(os.path.dirname(sys.orig_argv[-4])),
        "modules": hashlib.sha256(" ".join(sorted(sys.modules)).encode()).hexdigest()[:16],
        "frozen": gc.get_freeze_count(), "collector": [gc.isenabled(), gc.get_threshold()],
        # pid 2 (the zygote, or what forked a fresh runner): its ids and capabilities, whether we may signal it
        "pid2": [line for line in open("/proc/2/status").read().splitlines()
                 if line.split(":")[0] in ("Uid", "Gid", "CapEff", "CapPrm", "NoNewPrivs")],
        "signal2": may_signal(2),
        "log": re.sub(r"-[^-/]+/#[0-9]+", "-X/#N", os.readlink("/proc/self/fd/2")),
    }, sort_keys=True)
""")
FIRST_CELL = "import torch\nimport torch.nn.functional as F\nimport matplotlib.pyplot as plt"
RANDOM = "import random, numpy\nrandoms = [random.random(), float(numpy.random.rand()), float(torch.rand(()))]"


@pytest.fixture
def server():
    srv = forkserver.ForkServer(reply_timeout=3.0)
    srv.warm()
    yield srv
    srv.close()


def _observe(cells, source=None):
    with StudentSession(cells, runner_source=source) as s:
        s.run_notebook()
        forked = isinstance(s.proc, forkserver.ForkedRunner)
        return forked, json.loads(s.get("seen")), s.get("randoms")


def test_a_forked_runner_looks_like_a_fresh_one(server):
    cells = [FIRST_CELL, "import matplotlib\nplt.plot([1, 2]); plt.title('注意力')", RANDOM, OBSERVE]
    forked_a, seen_a, randoms_a = _observe(cells, server)
    forked_b, seen_b, randoms_b = _observe(cells, server)
    fresh, seen_fresh, randoms_fresh = _observe(cells)
    assert (forked_a, forked_b, fresh) == (True, True, False)
    assert server.handed == 2 and server.zygotes == 1
    # Both kinds warm up and fork alike (``zygote.serve_fresh``) and freeze the warm-up; the count varies by a
    # few objects from one warm-up to the next.  A fresh runner once froze only itself (15 times fewer).
    frozen = [seen.pop("frozen") for seen in (seen_a, seen_b, seen_fresh)]
    assert frozen[0] == frozen[1] > 100_000 and abs(frozen[2] - frozen[0]) < 100, frozen
    assert seen_a == seen_b == seen_fresh
    # The collector, off during the warm-up's imports, is on again with the interpreter's own thresholds.
    assert seen_fresh["collector"] == [True, list(gc.get_threshold())]
    assert seen_fresh["ppid"] == 1 and seen_fresh["others"] == []
    # Each process seeds its global RNGs from the OS, forked or not.
    assert len({tuple(randoms_a), tuple(randoms_b), tuple(randoms_fresh)}) == 3


def test_a_forked_runner_starts_with_the_warm_up_out_of_the_collectors_sight(server):
    """gc.freeze in the zygote: a runner's first full collection skips torch's and matplotlib's objects."""
    with StudentSession([FIRST_CELL, "import gc\nfrozen = gc.get_freeze_count()"], runner_source=server) as s:
        s.run_notebook()
        assert isinstance(s.proc, forkserver.ForkedRunner)
        assert s.get("frozen") > 100_000


def test_nothing_of_one_student_reaches_the_next(server):
    traces = next(s for s in catalogue.ATTACKS if s.name == "attack-leave-traces").append[0]
    with StudentSession([FIRST_CELL, traces, "import os\nos.environ['LEFT'] = '1'\nplanted = 1"],
                        runner_source=server) as a:
        outputs = a.run_notebook()
        assert all(o["output_type"] != "error" for out in outputs.values() for o in out), outputs
        assert isinstance(a.proc, forkserver.ForkedRunner)
    # The next student: clean sandbox, and a runner that is not killed by what the last one left.
    cells = [FIRST_CELL, "import time\ntime.sleep(0.5)\nimport statistics, fractions", OBSERVE]
    forked, seen, _ = _observe(cells, server)
    fresh, seen_fresh, _ = _observe(cells)
    assert forked and not fresh
    assert abs(seen.pop("frozen") - seen_fresh.pop("frozen")) < 100
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
    with StudentSession([probe], runner_source=server) as s:
        s.run_notebook()
        assert s.get("refused") == ["mem", "environ", "fd", "ptrace", "pidfd_getfd"]


def test_a_stopped_or_killed_zygote_is_replaced(server):
    stop_others = next(s for s in catalogue.ATTACKS if s.name == "attack-stop-everyone-else").append[0]
    with StudentSession([stop_others, "after = 1"], runner_source=server) as a:
        a.run_notebook()
        assert a.get("after") == 1  # stopping the zygote does not hurt the runner itself
    # pid 2 is a fresh runner itself, or the zygote: the sandbox dies with it, a moment later.
    # A runner of a uid of its own (root) may not signal the zygote: the grader's host kills it instead.
    killer = textwrap.dedent("""
        import os, signal, time
        try:
            os.kill(2, signal.SIGKILL)
        except PermissionError:
            open("refused", "w").close()
        time.sleep(20)
    """)
    killed = threading.Event()

    def kill_the_zygote_when_refused():
        deadline = time.monotonic() + 60
        while not killed.is_set() and time.monotonic() < deadline:
            zygote = server._zygote
            if zygote is not None and os.path.exists(os.path.join(zygote.top, "scratch", "refused")):
                os.kill(_zygote_pid(zygote), 9)
                killed.set()
            time.sleep(0.01)

    threading.Thread(target=kill_the_zygote_when_refused, daemon=True).start()
    with StudentSession(["x = 1", killer, "y = 2"], runner_source=server) as b:
        outputs = b.run_notebook()
        assert outputs[1][0]["ename"] == "KernelDied"
        assert (b.get("x"), b.get("y")) == (1, 2)  # restarted, the earlier cells replayed
    killed.set()
    forked, seen, _ = _observe([OBSERVE], server)
    # As root, SIGSTOP did not reach the zygote either: one zygote fewer was needed.
    assert forked and seen["others"] == [] and server.zygotes == (2 if launcher._is_real_root() else 3)


def test_a_session_never_shares_the_sandbox_with_another(server):
    with StudentSession(["a = 1"], runner_source=server) as first, \
            StudentSession(["b = 2"], runner_source=server) as second:
        first.run_notebook()
        second.run_notebook()
        assert isinstance(first.proc, forkserver.ForkedRunner)
        assert not isinstance(second.proc, forkserver.ForkedRunner)  # a fresh runner instead
        assert (first.get("a"), second.get("b")) == (1, 2) and server.missed == 1


def test_the_zygote_refuses_to_run_outside_its_own_pid_namespace(tmp_path):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.run([sys.executable, "-I", str(ZYGOTE)], stdin=theirs.fileno(),
                          cwd=tmp_path, capture_output=True, timeout=60)
    theirs.close()
    ours.settimeout(5)
    assert json.loads(ours.recv(4096))["op"] == "refused" and proc.returncode == 2


def test_grading_uses_fresh_runners_when_the_zygote_cannot_start(monkeypatch):
    command = runners.runner_command  # the session's fresh runners keep their own reference to it
    monkeypatch.setattr(runners, "runner_command", lambda limits: (
        [arg.replace("zygote.py", "no-such-zygote.py") for arg in command(limits)[0]], command(limits)[1]))
    srv = forkserver.ForkServer(start_timeout=20)
    srv.warm()
    try:
        with StudentSession(["z = 3"], runner_source=srv) as s:
            s.run_notebook()
            assert s.get("z") == 3 and not isinstance(s.proc, forkserver.ForkedRunner)
    finally:
        srv.close()
    assert srv.missed == 1 and srv.handed == 0


# A parent starts a zygote, forks a worker that adopts it, and lets go of it (``sdpa-course``'s early
# zygotes, ``local_workers.start_zygotes``); prints what it saw as JSON.
HANDOVER = textwrap.dedent("""
    import json, os, signal, sys, time
    from autograder.sandbox import forkserver, launcher
    from autograder.sandbox.session import StudentSession

    def gone(proc, seconds):
        deadline = time.monotonic() + seconds
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return proc.poll() is not None

    seen = {}
    for worker_dies in (False, True):
        server = forkserver.ForkServer(start_timeout=60, directory=sys.argv[1])
        server.warm()
        top = server._zygote.top
        pid = os.fork()
        if pid == 0:  # the worker
            server.adopt()
            with StudentSession(["import os\\nanswer = 42"], runner_source=server) as s:
                s.run_notebook()
                ok = s.get("answer") == 42 and server.handed == 1 and server.zygotes == 1
            if worker_dies:
                os.kill(os.getpid(), signal.SIGKILL)
            server.close()  # kills the zygote by its pid: it is not this process's child
            os._exit(0 if ok else 1)
        proc = server.release()
        status = os.waitpid(pid, 0)[1]
        seen["dies" if worker_dies else "closes"] = {
            "worker": status, "zygote_gone": gone(proc, 20), "dir_left": os.path.exists(top)}
    print(json.dumps(seen))
""")


def test_a_zygote_started_before_the_worker_is_its_and_ends_with_it(tmp_path):
    """The worker grades with the zygote its parent started, and the zygote ends when the worker closes
    it and when the worker is killed (its end of the socket closes; the parent holds none)."""
    proc = subprocess.run([sys.executable, "-c", HANDOVER, str(tmp_path)], capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["closes"] == {"worker": 0, "zygote_gone": True, "dir_left": False}
    assert seen["dies"]["worker"] == signal.SIGKILL and seen["dies"]["zygote_gone"] is True


def test_sessions_stop_forked_runners_through_the_zygote(server):
    with StudentSession(["import time\nwhile True:\n    time.sleep(0.01)", "after = 1"],
                        budget=session.Budget(cell_timeout=1.0), runner_source=server) as s:
        outputs = s.run_notebook()
        assert outputs[0][0]["ename"] == "CellTimeoutError" and s.get("after") == 1
    forked, seen, _ = _observe([OBSERVE], server)
    # Runners handed: the first, its retry after the overrun, the restart after the charge, and _observe's.
    assert forked and seen["others"] == [] and server.zygotes == 1 and server.handed == 4


def _zygote_pid(zygote):
    """Host pid of the zygote (pid 2 of its sandbox), as the fork server found it."""
    assert zygote.zygote_pid, "the fork server did not find its zygote"
    return zygote.zygote_pid


# Attacks on the sandbox a runner shares with the next one: on the zygote
# (pid 2), whose process every later runner inherits, and on what outlives a
# runner (a POSIX message queue, a key in the kernel's keyring, scratch's mode).
KEY_NAME = f"sdpa-attack-{secrets.token_hex(4)}"
ATTACKS = {
    "rlimit-as": "resource.prlimit(2, resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))",
    "rlimit-nofile": "resource.prlimit(2, resource.RLIMIT_NOFILE, (64, 64))",
    "rlimit-nproc": "resource.prlimit(2, resource.RLIMIT_NPROC, (8, 8))",
    "nice": "os.setpriority(os.PRIO_PROCESS, 2, 19)",
    "sched-idle": "os.sched_setscheduler(2, os.SCHED_IDLE, os.sched_param(0))",
    "affinity": "os.sched_setaffinity(2, {0})",
    "mqueue": "check(libc.mq_open(b'/sdpa-attack', os.O_CREAT | os.O_RDWR, 0o600, None))",
    "keyring": f"check(libc.syscall(NR['add_key'], b'user', b'{KEY_NAME}', b'v', 1, -4))",
    "chmod-scratch": "os.chmod('.', 0o555)",
}
SYSCALLS = "NR = {'x86_64': {'add_key': 248, 'keyctl': 250}, 'aarch64': {'add_key': 217, 'keyctl': 219}}[platform.machine()]"  # noqa: E501 - test data
ATTACK = textwrap.dedent("""
    import ctypes, os, platform, resource
    libc = ctypes.CDLL(None, use_errno=True)
    {syscalls}
    def check(result):
        if result == -1:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    try:
        {attack}
        done = True
    except OSError as e:
        done = e.errno
    uid = os.getuid()
""")
# What the next student observes with ordinary code.
VICTIM = textwrap.dedent("""
    import ctypes, json, os, platform, resource, threading
    libc = ctypes.CDLL(None, use_errno=True)
    {syscalls}
    def errno_of(result):
        return 0 if result != -1 else ctypes.get_errno()
    started = []
    try:
        thread = threading.Thread(target=started.append, args=(1,))
        thread.start()
        thread.join()
    except RuntimeError:
        pass
    import torch
    try:
        with open("victim.txt", "w") as f:
            f.write("mine")
        writable = open("victim.txt").read() == "mine"
    except OSError:
        writable = False
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    view = json.dumps({{
        "rlimits": {{name: resource.getrlimit(getattr(resource, name))
                    for name in dir(resource) if name.startswith("RLIMIT_")}},
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "scheduler": [os.sched_getscheduler(0), os.sched_getparam(0).sched_priority],
        "affinity": sorted(os.sched_getaffinity(0)),
        "thread": started, "torch": float(torch.ones(3).sum()), "writable": writable,
        "scratch_mode": oct(os.stat(".").st_mode), "tmp_mode": oct(os.stat("/tmp").st_mode),
        "mq_open": errno_of(libc.mq_open(b"/sdpa-attack", os.O_RDWR)),
        "add_key": errno_of(libc.syscall(NR["add_key"], b"user", b"victim", b"v", 1, -4)),
        "keyctl": errno_of(libc.syscall(NR["keyctl"], 0, -4, 0)),  # KEYCTL_GET_KEYRING_ID
        "status": {{key: value.strip() for key, value in status.items()
                   if key.startswith("Cap") or key in ("NoNewPrivs", "Seccomp", "Seccomp_filters", "Groups")}},
    }}, sort_keys=True)
""").format(syscalls=SYSCALLS)


def _victim_view(source=None):
    with StudentSession([VICTIM], runner_source=source) as s:
        outputs = s.run_notebook()
        assert all(o["output_type"] != "error" for out in outputs.values() for o in out), outputs
        return isinstance(s.proc, forkserver.ForkedRunner), json.loads(s.get("view"))


@pytest.fixture(scope="module")
def fresh_view():
    """What a fresh runner observes (no fork server)."""
    forked, view = _victim_view()
    assert not forked and view["writable"] and view["thread"] == [1]
    return view


def _differences(seen, expected):
    return {key: (seen.get(key), expected.get(key)) for key in expected.keys() | seen.keys()
            if seen.get(key) != expected.get(key)}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_the_shared_sandbox_does_not_reach_the_next_student(server, fresh_view, attack):
    cell = ATTACK.format(syscalls=SYSCALLS, attack=ATTACKS[attack])
    with StudentSession([cell], runner_source=server) as attacker:
        outputs = attacker.run_notebook()
        assert all(o["output_type"] != "error" for out in outputs.values() for o in out), outputs
        assert isinstance(attacker.proc, forkserver.ForkedRunner)
        done, uid = attacker.get("done"), attacker.get("uid")
    # Nothing was left in the host's kernel (as root, /proc/keys lists only root's keys; key-users lists all).
    with open("/proc/keys") as f:
        assert KEY_NAME not in f.read()
    if uid != os.getuid():
        with open("/proc/key-users") as f:
            assert str(uid) not in [line.split(":")[0].strip() for line in f]
    forked, view = _victim_view(server)
    assert forked and view == fresh_view, _differences(view, fresh_view)
    assert view["add_key"] == view["keyctl"] == view["mq_open"] == errno.EPERM  # the syscall filter
    if attack in ("mqueue", "keyring"):
        assert done == errno.EPERM  # refused by the syscall filter
    elif attack == "chmod-scratch":
        assert done is True and server.zygotes == 1  # allowed, and undone by the reset
    elif launcher._is_real_root():
        assert done == errno.EPERM and server.zygotes == 1  # the zygote is of another uid
    else:  # one uid for all: the zygote put it back (if it may), or noticed and was replaced
        assert done is True and (server.zygotes == 2 or attack in ("affinity", "sched-idle"))


@pytest.mark.parametrize("change", ["rlimit-nofile", "nice", "affinity"])
def test_a_zygote_whose_process_was_changed_refuses_to_fork(server, fresh_view, change):
    """What a runner could do to a zygote of its uid, done from the host: the zygote sees it."""
    forked, view = _victim_view(server)
    assert forked and view == fresh_view
    pid = _zygote_pid(server._zygote)
    if change == "rlimit-nofile":
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64))
    elif change == "nice":
        os.setpriority(os.PRIO_PROCESS, pid, 19)
    else:
        os.sched_setaffinity(pid, {0})
    first, view_first = _victim_view(server)
    second, view_second = _victim_view(server)
    assert view_first == view_second == fresh_view, _differences(view_first, fresh_view)
    if change == "affinity":
        assert first and second and server.zygotes == 1  # the zygote may widen its affinity again
    else:
        assert not first and second and server.zygotes == 2  # refused to fork; a new zygote
