"""Tests for autograder.sandbox: each one runs hostile code and checks it is contained."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder.sandbox import launcher
from autograder.sandbox.launcher import (
    SCRATCH_MOUNT,
    Limits,
    SandboxStatus,
    SandboxUnavailableError,
    SandboxUnavailableWarning,
    probe,
    sandboxed_popen,
)
from autograder.sandbox.procs import kill_tree

REPO = Path(__file__).resolve().parents[2]
STATUS = probe()
isolated = pytest.mark.skipif(not STATUS.isolated, reason=f"bubblewrap isolation unavailable: {STATUS.reason}")
KILLED = {128 + signal.SIGXCPU, 128 + signal.SIGKILL, -signal.SIGXCPU, -signal.SIGKILL}


def run(code: str, scratch: Path, timeout: float = 30, **kwargs) -> subprocess.CompletedProcess:
    """Run Python `code` in the sandbox and collect its output."""
    proc = sandboxed_popen([sys.executable, "-c", textwrap.dedent(code)], scratch=scratch,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_tree(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def namespace_members(proc: subprocess.Popen) -> list[int]:
    """Host pids of every process in the sandbox's pid namespace."""
    def pid_ns(pid):
        try:
            return os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            return None

    def ppid(pid):
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return None

    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    inits = [p for p in pids if ppid(p) == proc.pid]
    spaces = {pid_ns(p) for p in inits} - {None, pid_ns(os.getpid())}
    return [p for p in pids if pid_ns(p) in spaces]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    path = tmp_path / "scratch"
    path.mkdir()
    return path


@isolated
def test_course_files_are_invisible(tmp_path):
    course = tmp_path / "course"
    scratch = course / "scratch"  # even a scratch inside the course dir must not expose it
    scratch.mkdir(parents=True)
    secret = course / "secret.txt"
    secret.write_text("answer key")
    result = run(f"""
        import json, os, sys
        out = {{}}
        try:
            out["secret"] = open({str(secret)!r}).read()
        except OSError as e:
            out["secret"] = type(e).__name__
        try:
            out["listing"] = os.listdir({str(course)!r})
        except OSError as e:
            out["listing"] = type(e).__name__
        out["repo"] = os.path.exists({str(REPO / "autograder" / "sandbox.py")!r})
        out["venv_parent"] = os.listdir(os.path.dirname(sys.prefix))
        out["cwd"] = os.getcwd()
        print(json.dumps(out))
    """, scratch)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["secret"] in ("FileNotFoundError", "PermissionError")
    assert out["listing"] in ("FileNotFoundError", "PermissionError") or "secret.txt" not in out["listing"]
    assert out["repo"] is False
    assert set(out["venv_parent"]) <= {os.path.basename(sys.prefix)}
    assert out["cwd"] == SCRATCH_MOUNT


@isolated
def test_writes_only_reach_scratch(tmp_path, scratch):
    outside = tmp_path / "escaped.txt"
    result = run(f"""
        import os, sys
        open("inside.txt", "w").write("hello")
        open("/tmp/private.txt", "w").write("tmp works")
        for target in [{str(outside)!r}, "/usr/escaped.txt", os.path.join(sys.prefix, "escaped.txt"),
                       "/etc/escaped.txt", "/escaped.txt"]:
            try:
                open(target, "w").write("x")
                print("WROTE", target)
            except OSError as e:
                print("blocked", target, type(e).__name__)
    """, scratch)
    assert result.returncode == 0, result.stderr
    assert "WROTE" not in result.stdout
    assert result.stdout.count("blocked") == 5
    assert (scratch / "inside.txt").read_text() == "hello"
    assert not outside.exists()
    assert not Path(sys.prefix, "escaped.txt").exists()


@isolated
def test_readonly_paths_are_visible_but_not_writable(tmp_path, scratch):
    runner = tmp_path / "runner.py"
    runner.write_text("print('runner ran')\n")
    runner.chmod(0o644)
    (tmp_path / "neighbour.txt").write_text("not exposed")
    proc = sandboxed_popen([sys.executable, str(runner)], scratch=scratch, readonly=[runner],
                           stdout=subprocess.PIPE, text=True)
    assert proc.communicate(timeout=30)[0] == "runner ran\n"
    result = run(f"""
        import os, sys
        print(sorted(os.listdir({str(tmp_path)!r})))
        try:
            open({str(runner)!r}, "a").write("tampered")
        except OSError:
            print("blocked")
        options = {{}}
        for line in open("/proc/self/mountinfo"):
            fields = line.split()
            options[fields[4]] = fields[5].split(",")
        print(sorted(path for path in [{str(runner)!r}, sys.prefix, "/usr", "/"] if "ro" in options[path]))
    """, scratch, readonly=[runner])
    expected_ro = str(sorted([str(runner), sys.prefix, "/usr", "/"]))
    assert result.stdout.splitlines() == ["['runner.py']", "blocked", expected_ro], result.stderr
    assert runner.read_text() == "print('runner ran')\n"


@isolated
@pytest.mark.skipif(not launcher._is_real_root(), reason="only root runs the sandbox under another uid")
def test_unreadable_readonly_path_is_rejected_as_root(tmp_path, scratch):
    private = tmp_path / "private.py"
    private.write_text("")
    private.chmod(0o600)
    with pytest.raises(PermissionError, match="world-readable"):
        sandboxed_popen([sys.executable, str(private)], scratch=scratch, readonly=[private])


@isolated
def test_no_network(scratch):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    with server:
        result = run(f"""
            import socket
            print(sorted(name for _, name in socket.if_nameindex()))
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
                print("CONNECTED")
            except OSError as e:
                print("blocked", type(e).__name__)
        """, scratch)
        with pytest.raises(socket.timeout):
            server.accept()
    assert result.stdout.splitlines() == ["['lo']", "blocked ConnectionRefusedError"], result.stderr


@isolated
def test_memory_limit(scratch):
    result = run("""
        ok = bytearray(256 * 2**20)
        try:
            big = bytearray(2 * 2**30)
            print("ALLOCATED")
        except MemoryError:
            print("MemoryError")
    """, scratch, limits=Limits(memory_bytes=2**30))
    assert result.stdout.strip() == "MemoryError", result.stderr


@isolated
def test_cpu_limit_kills_busy_loop(scratch):
    start = time.monotonic()
    result = run("while True: pass", scratch, timeout=20, limits=Limits(cpu_seconds=2))
    assert result.returncode in KILLED
    assert time.monotonic() - start < 8


@isolated
def test_process_limit_stops_forking(scratch):
    result = run("""
        import os, time
        n = 0
        try:
            while n < 1000:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                n += 1
        except OSError as e:
            print(n, e.errno)
    """, scratch, limits=Limits(max_processes=16))
    forked, error = map(int, result.stdout.split())
    assert error == errno.EAGAIN
    assert 10 <= forked < 16


@isolated
def test_fork_bomb_is_contained_and_killable(scratch):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    proc = sandboxed_popen([sys.executable, "-c", bomb], scratch=scratch, limits=Limits(max_processes=32))
    try:
        assert wait_for(lambda: len(namespace_members(proc)) >= 20), "the bomb never got going"
        peak, members = 0, []
        for _ in range(20):
            members = namespace_members(proc)
            peak = max(peak, len(members))
            time.sleep(0.05)
        assert peak <= 33  # 32 tasks of the sandbox uid, plus bwrap's pid 1
        start = time.monotonic()
        subprocess.run(["true"], check=True, timeout=5)
        assert time.monotonic() - start < 2, "host became unresponsive"
    finally:
        start = time.monotonic()
        kill_tree(proc)
    assert time.monotonic() - start < 5
    assert not [pid for pid in members if alive(pid)]
    assert namespace_members(proc) == []


@isolated
def test_file_size_limit(scratch):
    result = run("""
        open("small.bin", "wb").write(bytes(512 * 1024))
        try:
            with open("big.bin", "wb") as f:
                f.write(bytes(2 * 2**20))
            print("WROTE")
        except OSError as e:
            print(e.errno)
    """, scratch, limits=Limits(max_file_bytes=2**20))
    assert result.stdout.strip() == str(errno.EFBIG), result.stderr
    assert (scratch / "small.bin").stat().st_size == 512 * 1024
    assert (scratch / "big.bin").stat().st_size <= 2**20


@isolated
def test_course_libraries_work_inside(scratch):
    result = run("""
        import os, IPython, numpy, torch
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        q = torch.randn(1, 2, 4, 8)
        print(tuple(torch.nn.functional.scaled_dot_product_attention(q, q, q).shape))
        plt.plot([1, 2, 3])
        plt.savefig("/tmp/fig.png")
        print(os.path.getsize("/tmp/fig.png") > 0)
    """, scratch, timeout=120)
    assert result.stdout.splitlines() == ["(1, 2, 4, 8)", "True"], result.stderr


@isolated
def test_environment_is_cleared(scratch, monkeypatch):
    monkeypatch.setenv("SANDBOX_TEST_SECRET", "hunter2")
    result = run("import json, os; print(json.dumps(dict(os.environ)))", scratch, env={"EXTRA": "yes"})
    env = json.loads(result.stdout)
    assert "hunter2" not in result.stdout
    assert env["EXTRA"] == "yes"
    assert env["HOME"] == SCRATCH_MOUNT and env["TMPDIR"] == "/tmp"
    assert env["MPLBACKEND"] == "Agg" and env["OMP_NUM_THREADS"] == "1"
    assert env["PWD"] == SCRATCH_MOUNT
    assert not set(env) - {*launcher._environment("", "", None), "EXTRA", "PWD"}


@isolated
def test_pass_fds_reach_the_sandbox(scratch):
    read_end, write_end = os.pipe()
    proc = sandboxed_popen([sys.executable, "-c", f"import os; os.write({write_end}, b'result')"],
                           scratch=scratch, pass_fds=[write_end])
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b"result"
    assert proc.wait(timeout=30) == 0


@isolated
def test_kill_tree_leaves_nothing_behind(scratch):
    code = "import subprocess, time\n[subprocess.Popen(['sleep', '1000']) for _ in range(3)]\ntime.sleep(1000)\n"
    proc = sandboxed_popen([sys.executable, "-c", code], scratch=scratch)
    assert wait_for(lambda: len(namespace_members(proc)) >= 5), "children never started"
    members = namespace_members(proc)
    kill_tree(proc)
    assert proc.returncode is not None
    assert not [pid for pid in members if alive(pid)]


@isolated
def test_sandbox_dies_with_its_parent(scratch):
    parent_code = textwrap.dedent(f"""
        import sys, time
        from autograder.sandbox.launcher import sandboxed_popen
        proc = sandboxed_popen([sys.executable, "-c", "import time; time.sleep(1000)"], scratch={str(scratch)!r})
        print(proc.pid, flush=True)
        time.sleep(1000)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        bwrap = subprocess.Popen.__new__(subprocess.Popen)
        bwrap.pid = int(parent.stdout.readline())
        assert wait_for(lambda: len(namespace_members(bwrap)) >= 2), "sandbox never started"
        members = namespace_members(bwrap)
    finally:
        parent.kill()
        parent.wait()
    assert wait_for(lambda: not [pid for pid in members if alive(pid)], timeout=5)


def test_fallback_warns_loudly_or_refuses(scratch, monkeypatch, caplog):
    monkeypatch.setattr(launcher, "probe", lambda: SandboxStatus(False, "none (rlimits only)", "pretend: no bwrap"))
    code = "import os, resource; print(os.getcwd()); print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    with caplog.at_level(logging.WARNING, logger="autograder.sandbox"):
        with pytest.warns(SandboxUnavailableWarning, match="WITHOUT"):
            proc = sandboxed_popen([sys.executable, "-c", code], scratch=scratch,
                                   limits=Limits(memory_bytes=2**31), stdout=subprocess.PIPE, text=True)
    out = proc.communicate(timeout=30)[0].split()
    kill_tree(proc)
    assert any("SANDBOX UNAVAILABLE" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert out == [os.path.realpath(scratch), str(2**31)]  # still confined to scratch and rlimited
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap") as raised:
        sandboxed_popen([sys.executable, "-c", "pass"], scratch=scratch, require_isolation=True)
    assert "\n" not in str(raised.value) and "pretend: no bwrap" in str(raised.value)


def test_probe_reports_missing_bwrap(monkeypatch):
    monkeypatch.setattr(launcher, "_bwrap_info", lambda: None)
    status = launcher.probe.__wrapped__()
    assert status == SandboxStatus(False, "none (rlimits only)", "bubblewrap (bwrap) is not installed")


# Refused by the shim's syscall filter; arguments chosen so that nothing is created if it were not.
SYSCALL_FILTER_PROBE = """
    import ctypes, json, os, platform
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {"x86_64": dict(add_key=248, request_key=249, keyctl=250, mq_open=240, mq_unlink=241, mq_notify=244,
                         getpid=39, x32_getpid=0x40000000 | 39),
          "aarch64": dict(add_key=217, request_key=218, keyctl=219, mq_open=180, mq_unlink=181, mq_notify=184,
                          getpid=172)}[platform.machine()]
    def call(name, *args):
        result = libc.syscall(nr[name], *args)
        return ctypes.get_errno() if result == -1 else "ok"
    print(json.dumps({
        "add_key": call("add_key", b"no-such-type", b"d", None, 0, -4),
        "request_key": call("request_key", b"no-such-type", b"d", None, -4),
        "keyctl": call("keyctl", 9999, 0, 0),
        "mq_open": call("mq_open", b"no-such-queue", os.O_RDWR, 0, None),
        "mq_unlink": call("mq_unlink", b"no-such-queue"),
        "mq_notify": call("mq_notify", -1, None),
        "x32": call("x32_getpid") if "x32_getpid" in nr else 1,
        "getpid": call("getpid"),
        "seccomp": [line.split()[1] for line in open("/proc/self/status") if line.startswith("Seccomp:")],
    }))
"""
FILTERED = {"add_key": errno.EPERM, "request_key": errno.EPERM, "keyctl": errno.EPERM, "mq_open": errno.EPERM,
            "mq_unlink": errno.EPERM, "mq_notify": errno.EPERM, "x32": errno.EPERM, "getpid": "ok",
            "seccomp": ["2"]}


@isolated
def test_keys_and_message_queues_are_refused(scratch):
    result = run(SYSCALL_FILTER_PROBE, scratch)
    assert json.loads(result.stdout) == FILTERED, result.stderr


def test_keys_and_message_queues_are_refused_without_bwrap_too(scratch, monkeypatch):
    monkeypatch.setattr(launcher, "probe", lambda: SandboxStatus(False, "none (rlimits only)", "pretend: no bwrap"))
    with pytest.warns(SandboxUnavailableWarning):
        result = run(SYSCALL_FILTER_PROBE, scratch)
    assert json.loads(result.stdout) == FILTERED, result.stderr


@isolated
@pytest.mark.skipif(not launcher._is_real_root(), reason="only root runs the sandbox under another uid")
def test_a_zygote_keeps_uid_0_with_only_the_capabilities_it_needs(scratch):
    code = "import os; print(os.getuid(), [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])"  # noqa: E501 - test data
    proc = sandboxed_popen([sys.executable, "-c", code], scratch=scratch, zygote=True, stdout=subprocess.PIPE,
                           text=True)
    uid, caps = proc.communicate(timeout=30)[0].split()
    kill_tree(proc)
    wanted = {"CAP_SETUID": 7, "CAP_SETGID": 6, "CAP_KILL": 5, "CAP_CHOWN": 0, "CAP_FOWNER": 3, "CAP_DAC_OVERRIDE": 1}
    assert set(wanted) == set(launcher.ZYGOTE_CAPS)
    assert (uid, int(caps, 16)) == ("0", sum(1 << bit for bit in wanted.values()))
