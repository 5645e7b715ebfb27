"""Run the course as it is deployed: JupyterHub, the nbgrader exchange, one Unix user per person.

``python -m hub.control start`` (what ``make hub`` runs, as root) sets up and starts a
JupyterHub on this machine:

- local Unix users ``sdpa-instructor`` and ``sdpa-student-a/b/c`` (the ``sdpa-`` prefix marks
  them as this course's demo/test users), each with a private home (mode 700) and a random
  password kept in the hub's state directory (root only);
- the nbgrader exchange in a shared directory, world-writable with the sticky bit (nbgrader's
  docs ask for ``chmod ugo+rw``; the sticky bit keeps one user from renaming another's entries);
- a copy of this course in the instructor's home, owned by the instructor and readable by
  nobody else, whose ``nbgrader_config.py`` (sandboxed execution, trusted scoring, offline
  feedback pages) is loaded by the instructor's nbgrader, formgrader included;
- both editions of the assignment (``sdpa`` in Chinese, ``sdpa_en`` in English) generated and
  released, and JupyterLab in each student's language (``LAB_LOCALES``: the zh-CN language pack
  for the students of the Chinese edition);
- nbgrader's server and lab extensions: all of them for the instructor, the student ones for
  students (formgrader, course list and create-assignment are switched off for them);
- the students' servers and kernels run from their own venv outside this checkout (``make student-env``,
  ``hub/student_env.py``), which holds nothing of the grader, and this checkout (answers, hidden checks,
  samples, the grader's venv) is closed to them: an ACL entry per student with no permission at all;
- JupyterHub from PyPI (PAM logins of those users, LocalProcessSpawner) behind
  configurable-http-proxy from npm (``hub/node_modules``, ``make hub-deps``);
- the check service ("Check my work", ``python -m autograder.service``) as a hub-managed service running as
  its own system user ``sdpa-checker``, which reads the course through an ACL (read-only) and writes only its
  record, ``check_service/check_service.db`` in the course (readable by the instructor); each user's server
  forwards checks to it with the server's hub token (``autograder/service/forward.py``).

``python -m hub.control stop`` stops the hub, its proxy, every single-user server and kernel,
and any process still running as one of the course users.  The tests use the same class
(:class:`Hub`) with their own state directory, exchange and ports.
"""
import argparse
import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from autograder.notebook.editions import EDITIONS
from autograder.sandbox.guest import procfs

ROOT = Path(__file__).resolve().parents[1]
HUB_DIR = ROOT / "hub"
VENV_BIN = Path(sys.executable).parent
PROXY = HUB_DIR / "node_modules" / ".bin" / "configurable-http-proxy"

INSTRUCTOR = "sdpa-instructor"
STUDENTS = ("sdpa-student-a", "sdpa-student-b", "sdpa-student-c")
USERS = (INSTRUCTOR, *STUDENTS)
CHECKER = "sdpa-checker"  # the check service's own system user: no login, no password
CHECK_SERVICE = "sdpa-check"  # its name in the hub: /services/sdpa-check/
CHECKS_PER_HOUR = 10
GROUP = "sdpa-hub"  # every course user; gets traverse-only access to the interpreter's directories
COURSE_ID = "sdpa-course"
COURSE_NAME = "sdpa-course"  # the course directory in the instructor's home
ASSIGNMENT = "sdpa"
ASSIGNMENTS = tuple(EDITIONS)  # every edition of the course is released
# JupyterLab's display language per student (the translation extension's `locale`; zh_CN comes from
# the jupyterlab-language-pack-zh-CN package). A student can change it in Settings > Language.
LAB_LOCALES = {"sdpa-student-a": "zh_CN", "sdpa-student-b": "en", "sdpa-student-c": "zh_CN"}

# Outside the checkout, which the students may not enter: they read their Jupyter config from the state directory.
DEFAULT_STATE = Path("/srv/sdpa-hub/state")
DEFAULT_EXCHANGE = Path("/srv/sdpa-hub/exchange")
# The students' environment (``make student-env``; the Makefile's STUDENT_VENV).
STUDENT_VENV = Path(os.environ.get("SDPA_STUDENT_VENV", "/srv/sdpa-hub/student-venv"))
DEFAULT_PORT = 8000

# Lab plugins and server extensions a student does not get (nbgrader's docs: "disable the
# formgrader and create assignment extensions for students").
STUDENT_OFF_SERVER = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")
FORWARD = "sdpa_check_my_work"  # "Check my work": the user's server forwards to the check service
STUDENT_OFF_LAB = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                   "@jupyter/nbgrader:create-assignment")


class NotRoot(RuntimeError):
    """Creating users, homes and the exchange needs root."""


def _run(*cmd, check=True, **kwargs):
    return subprocess.run([str(c) for c in cmd], check=check, capture_output=True, text=True, **kwargs)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def home(user):
    return Path(pwd.getpwnam(user).pw_dir)


def uid(user):
    return pwd.getpwnam(user).pw_uid


def as_user(user):
    """preexec_fn for subprocess: become `user` (groups, gid, uid), as JupyterHub's spawner does."""
    entry = pwd.getpwnam(user)

    def demote():
        os.initgroups(user, entry.pw_gid)
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
    return demote


def bin_dir(user):
    """The venv `user`'s server runs from: this checkout's for the instructor (and the grader), the students' own
    for a student."""
    return STUDENT_VENV / "bin" if user in STUDENTS else VENV_BIN


def user_env(user, **extra):
    """A minimal login-like environment for `user` (the venv's bin first on PATH: nbgrader calls alembic)."""
    entry = pwd.getpwnam(user)
    env = {"HOME": entry.pw_dir, "USER": user, "LOGNAME": user, "SHELL": "/bin/bash", "LANG": "C.UTF-8",
           "PATH": f"{bin_dir(user)}:/usr/local/bin:/usr/bin:/bin"}
    env.update(extra)
    return env


# ------------------------------------------------------------------- processes


def _owners():
    """{pid: uid} of every live process."""
    owners = {}
    for pid in procfs.pids():
        try:
            owners[pid] = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
    return owners


def descendants(pid):
    """Pids of every live process below `pid`."""
    return procfs.descendants(pid)


def user_processes(users=USERS):
    """Pids of processes running as one of the course users (servers, kernels, sandboxes)."""
    uids = set()
    for user in users:
        try:
            uids.add(uid(user))
        except KeyError:
            pass
    return [pid for pid, owner in _owners().items() if owner in uids and pid != os.getpid()]


def course_processes():
    """Every process of the course's users and of the check service's user."""
    return user_processes((*USERS, CHECKER))


def _kill(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return procfs.state(pid) not in ("", "Z")  # a zombie child of ours counts as gone


# ------------------------------------------------------------------------ hub


def _install_acl():
    print("  installing acl (apt-get) for setfacl")
    _run("apt-get", "update", "-qq")
    _run("apt-get", "install", "-y", "-qq", "acl", env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


class Hub:
    """One JupyterHub for this course: state directory, exchange, course copy, ports."""

    def __init__(self, state=DEFAULT_STATE, exchange=DEFAULT_EXCHANGE, port=DEFAULT_PORT, ip="127.0.0.1",
                 course_name=COURSE_NAME, check_service=True, checks_per_hour=CHECKS_PER_HOUR):
        self.state = Path(state)
        self.exchange = Path(exchange)
        self.port = int(port)
        self.ip = ip
        self.course_name = course_name
        self.pidfile = self.state / "jupyterhub.pid"
        self.log = self.state / "jupyterhub.log"
        self.settings_file = self.state / "hub.json"
        self.check_service, self.checks_per_hour = check_service, checks_per_hour

    # ---------------------------------------------------------------- set-up

    @property
    def course(self):
        return home(INSTRUCTOR) / self.course_name

    @property
    def url(self):
        return f"http://{self.ip}:{self.port}"

    def passwords(self):
        return json.loads((self.state / "passwords.json").read_text())

    def setup(self, fresh_course=False):
        """Users, exchange, the instructor's course, Jupyter config. Idempotent; needs root."""
        if os.geteuid() != 0:
            raise NotRoot("setting up the hub creates Unix users and directories: run it as root")
        if not PROXY.exists():
            raise RuntimeError(f"configurable-http-proxy is missing ({PROXY}); run `make hub-deps`")
        if not (STUDENT_VENV / "bin" / "jupyterhub-singleuser").exists():
            raise RuntimeError(f"the students' environment is missing ({STUDENT_VENV}); run `make hub-deps`")
        self.state.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state, 0o711)  # the users read only the config dirs below, never the secrets
        self._users()
        self._interpreter_access()
        self._close_checkout()
        self._exchange()
        self._course(fresh=fresh_course)
        if self.check_service:
            self._checker()
        self._jupyter_config()

    def _users(self):
        try:
            grp.getgrnam(GROUP)
        except KeyError:
            _run("groupadd", GROUP)
        path = self.state / "passwords.json"
        passwords = json.loads(path.read_text()) if path.exists() else {}
        for user in USERS:
            try:
                pwd.getpwnam(user)
            except KeyError:
                _run("useradd", "--create-home", "--shell", "/bin/bash", "--user-group", "--groups", GROUP,
                     "--comment", "sdpa course demo user (make hub)", user)
            _run("usermod", "--append", "--groups", GROUP, user)
            user_home = home(user)
            os.chmod(user_home, 0o700)  # Debian's useradd makes homes 755: everyone could read everyone's work
            passwords.setdefault(user, secrets.token_urlsafe(9))
            # No "news?" toast over the notebook and no update check (no network in classrooms/CI).
            settings = user_home / ".jupyter/lab/user-settings/@jupyterlab/apputils-extension"
            settings.mkdir(parents=True, exist_ok=True)
            (settings / "notification.jupyterlab-settings").write_text(
                json.dumps({"fetchNews": "false", "checkForUpdates": False}))
            if user in LAB_LOCALES:
                language = user_home / ".jupyter/lab/user-settings/@jupyterlab/translation-extension"
                language.mkdir(parents=True, exist_ok=True)
                (language / "plugin.jupyterlab-settings").write_text(json.dumps({"locale": LAB_LOCALES[user]}))
            _run("chown", "-R", f"{user}:{user}", user_home / ".jupyter")
        _run("chpasswd", input="".join(f"{u}:{passwords[u]}\n" for u in USERS))
        path.write_text(json.dumps(passwords, indent=1))
        os.chmod(path, 0o600)

    def _interpreter_access(self):
        """Let the course users run this venv's Python.

        The venv's interpreter may live under a directory only root can enter (pyenv under
        /root here): grant the course group traverse-only access (an ACL entry ``g:sdpa-hub:x``,
        no listing, no reading) on each such directory, and nothing else.
        """
        targets = {Path(os.path.realpath(sys.executable)), VENV_BIN, PROXY.resolve(), ROOT,
                   Path(os.path.realpath(STUDENT_VENV / "bin" / "python")), STUDENT_VENV / "bin"}
        blocked = set()
        for target in targets:
            for parent in [target, *target.parents]:
                if parent.is_dir() and not os.stat(parent).st_mode & stat.S_IXOTH:
                    blocked.add(parent)
        if not blocked:
            return
        if not shutil.which("setfacl"):
            _install_acl()
        for path in sorted(blocked):
            if f"group:{GROUP}:--x" in _run("getfacl", "-p", path).stdout:
                continue
            _run("setfacl", "-m", f"g:{GROUP}:x", path)
            print(f"  {path}: traverse-only ACL for group {GROUP} (the venv's Python lives below it)")

    def _close_checkout(self):
        """No student may enter this checkout (solutions, hidden checks, samples) or the grader's venv: a named-user
        ACL entry with no permission outranks the group and other entries that let everyone else in."""
        if not shutil.which("setfacl"):
            _install_acl()
        for path in sorted({ROOT, VENV_BIN.parent}):
            for user in STUDENTS:
                _run("setfacl", "-m", f"u:{user}:---", path)
        print(f"  {ROOT}: closed to the students (ACL u:<student>:---)")

    def _exchange(self):
        self.exchange.mkdir(parents=True, exist_ok=True)
        parent = self.exchange.parent
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            os.chmod(parent, os.stat(parent).st_mode | 0o011)
        os.chmod(self.exchange, 0o1777)
        self._inbox()

    def _inbox(self):
        """The course's inbox, made before nbgrader's release would make it (and kept by it), with the sticky bit:
        nbgrader makes it 733, so any student who learns another's submission name could rename or delete that
        folder (a red-team pass saw ``drwx-ws-wx``).  Owned by the instructor, as release requires."""
        owner = pwd.getpwnam(INSTRUCTOR)
        course = self.exchange / COURSE_ID
        for path, mode in ((course, 0o755), (course / "inbound", 0o1733)):
            if not path.exists():
                path.mkdir()
                os.chown(path, owner.pw_uid, owner.pw_gid)
                os.chmod(path, mode)
        inbound = course / "inbound"
        os.chmod(inbound, stat.S_IMODE(inbound.stat().st_mode) | stat.S_ISVTX)

    def _course(self, fresh=False):
        sys.path.insert(0, str(ROOT))
        from autograder.demo import course as course_files

        if fresh and self.course.exists():
            shutil.rmtree(self.course)
        if not self.course.exists():
            course_files.make_course(self.course)
            # The instructor generates the student versions (formgrader's Generate, or `release`).
            for assignment in ASSIGNMENTS:
                shutil.rmtree(self.course / "assignments" / assignment, ignore_errors=True)
        _run("chown", "-R", f"{INSTRUCTOR}:{INSTRUCTOR}", self.course)
        os.chmod(self.course, 0o700)

    @property
    def checker_home(self):
        return self.state / "checker"

    @property
    def check_records(self):
        return self.course / "check_service" / "check_service.db"

    def _checker(self):
        """The check service's user: reads the course (ACL, read-only, also on what the instructor adds later),
        writes only its record's directory, which the instructor reads (the class report's "while working")."""
        try:
            pwd.getpwnam(CHECKER)
        except KeyError:
            _run("useradd", "--system", "--shell", "/usr/sbin/nologin", "--user-group", "--groups", GROUP,
                 "--home-dir", self.checker_home, "--comment", "sdpa course check service (make hub)", CHECKER)
        _run("usermod", "--append", "--groups", GROUP, CHECKER)
        self.checker_home.mkdir(exist_ok=True)
        _run("chown", f"{CHECKER}:{CHECKER}", self.checker_home)
        os.chmod(self.checker_home, 0o700)
        if not shutil.which("setfacl"):
            _install_acl()
        instructor_home = home(INSTRUCTOR)
        _run("setfacl", "-m", f"u:{CHECKER}:x", instructor_home)  # through the home, to the course only
        _run("setfacl", "-R", "-m", f"u:{CHECKER}:rX", self.course)
        _run("setfacl", "-R", "-d", "-m", f"u:{CHECKER}:rX", self.course)
        records = self.check_records.parent
        records.mkdir(exist_ok=True)
        _run("setfacl", "-b", "-k", records)
        _run("chown", f"{CHECKER}:{INSTRUCTOR}", records)
        os.chmod(records, 0o2750)  # the instructor's group reads; files inherit the group

    def _jupyter_config(self):
        """Per-role config dirs, put on each server's JUPYTER_CONFIG_PATH by jupyterhub_config.py."""
        exchange = str(self.exchange)
        for role in ("instructor", "student"):
            conf = self.state / "jupyter" / role
            (conf / "labconfig").mkdir(parents=True, exist_ok=True)
            lines = ['"""Written by hub/control.py for this hub; see docs/instructor/hub.md."""',
                     "c = get_config()  # noqa: F821"]
            if role == "instructor":
                course_config = self.course / "nbgrader_config.py"
                lines += [
                    # The nbgrader commands also read CourseDirectory.root/nbgrader_config.py, but the
                    # formgrader (the Lab extension) reads only the Jupyter config path and the server's
                    # working directory (the home): load the course's own config (sandbox, trusted
                    # scoring, offline feedback) here so that its buttons grade like the commands.
                    f"load_subconfig({str(course_config)!r})  # noqa: F821",
                    f"c.CourseDirectory.root = {str(self.course)!r}",
                ]
                server = {"ServerApp": {"jpserver_extensions": {FORWARD: True}}}
                lab = {"disabledExtensions": {}}
            else:
                server = {"ServerApp": {"jpserver_extensions": {**{name: False for name in STUDENT_OFF_SERVER},
                                                                FORWARD: True}}}
                lab = {"disabledExtensions": {name: True for name in STUDENT_OFF_LAB}}
            lines += [f"c.CourseDirectory.course_id = {COURSE_ID!r}", f"c.Exchange.root = {exchange!r}", ""]
            (conf / "nbgrader_config.py").write_text("\n".join(lines))
            (conf / "jupyter_server_config.json").write_text(json.dumps(server, indent=1))
            (conf / "labconfig" / "page_config.json").write_text(json.dumps(lab, indent=1))
            for path in [conf.parent, conf, *conf.rglob("*")]:
                os.chmod(path, 0o755 if path.is_dir() else 0o644)

    def run_as(self, user, *cmd, cwd=None, timeout=600, check=True, input=None):
        """Run `cmd` as `user` with that user's role config (what their hub server sees), like a terminal."""
        role = "instructor" if user == INSTRUCTOR else "student"
        env = user_env(user, JUPYTER_CONFIG_PATH=str(self.state / "jupyter" / role),
                       SDPA_EXCHANGE_ROOT=str(self.exchange))
        proc = subprocess.run([str(c) for c in cmd], cwd=cwd or home(user), env=env, preexec_fn=as_user(user),
                              capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise RuntimeError(f"as {user}: {' '.join(map(str, cmd))} exited {proc.returncode}:\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def nbgrader(self, user, *args, **kwargs):
        return self.run_as(user, bin_dir(user) / "nbgrader", *args, **kwargs)

    def release(self, assignments=ASSIGNMENTS):
        """Generate and release `assignments` as the instructor (formgrader's Generate and Release buttons)."""
        for assignment in assignments:
            self.nbgrader(INSTRUCTOR, "generate_assignment", assignment, "--force", cwd=self.course)
            self.nbgrader(INSTRUCTOR, "release_assignment", assignment, "--force", cwd=self.course)

    def reset_student_work(self):
        """Remove the students' fetched assignments and nbgrader caches (tests start from a clean slate)."""
        for user in STUDENTS:
            for path in (*(home(user) / a for a in ASSIGNMENTS), home(user) / ".local/share/jupyter/nbgrader_cache"):
                shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------- running

    def pid(self):
        try:
            pid = int(self.pidfile.read_text())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def start(self, timeout=120):
        """Start JupyterHub in the background; return once its API answers."""
        if self.pid():
            raise RuntimeError(f"a hub is already running (pid {self.pid()}); `make hub-stop` first")
        settings = {"port": self.port, "ip": self.ip, "state": str(self.state), "venv_bin": str(VENV_BIN),
                    "student_bin": str(STUDENT_VENV / "bin"),
                    "exchange": str(self.exchange),
                    "proxy": str(PROXY), "hub_port": free_port(), "api_port": free_port(),
                    "admin": INSTRUCTOR, "users": list(USERS)}
        if self.check_service:
            settings["check_service"] = {"name": CHECK_SERVICE, "user": CHECKER, "port": free_port(),
                                         "home": str(self.checker_home), "course": str(self.course),
                                         "records": str(self.check_records), "per_hour": self.checks_per_hour}
        # The hub's own files are root's alone: the state directory is open to the users (their Jupyter config),
        # and its database and log name every user, server and token (a red-team pass read them as a student).
        for private in (self.settings_file, self.log, self.state / "jupyterhub.sqlite"):
            os.close(os.open(private, os.O_WRONLY | os.O_CREAT, 0o600))
            os.chmod(private, 0o600)
        self.settings_file.write_text(json.dumps(settings, indent=1))
        env = {**os.environ, "SDPA_HUB_SETTINGS": str(self.settings_file),
               "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
        cmd = [str(VENV_BIN / "jupyterhub"), "-f", str(HUB_DIR / "jupyterhub_config.py")]
        with open(self.log, "ab") as log:
            proc = subprocess.Popen(cmd, cwd=self.state, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.pidfile.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyterhub exited ({proc.returncode}):\n{self.log_tail()}")
            try:
                urllib.request.urlopen(f"{self.url}/hub/api", timeout=5)
                return proc
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"jupyterhub did not answer within {timeout}s:\n{self.log_tail()}") from None
                time.sleep(0.5)

    def log_tail(self, chars=4000):
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self, timeout=30):
        """Stop the hub (it stops the proxy and the servers), then anything of ours that outlived it."""
        pid = self.pid()
        below = descendants(pid) if pid else []
        if pid:
            _kill([pid], signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            _kill([pid], signal.SIGKILL)
            try:  # reap it when it is our own child (the tests); `make hub`'s hub is init's
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        leftovers = [p for p in below if _alive(p)] + course_processes()
        _kill(leftovers, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in leftovers) and time.monotonic() < deadline:
            time.sleep(0.2)
        _kill([p for p in leftovers if _alive(p)], signal.SIGKILL)
        # what a dying process started meanwhile (a grading process, a reading server) is the users' too
        deadline = time.monotonic() + 10
        while course_processes() and time.monotonic() < deadline:
            _kill(course_processes(), signal.SIGKILL)
            time.sleep(0.2)
        try:
            self.pidfile.unlink()
        except FileNotFoundError:
            pass
        still = [p for p in [pid, *below, *course_processes()] if p and _alive(p)]
        return still


def _banner(hub):
    passwords = hub.passwords()
    lines = [f"JupyterHub for the sdpa course: {hub.url}/",
             f"  instructor  {INSTRUCTOR:16} password {passwords[INSTRUCTOR]}   (Nbgrader > Formgrader)",
             *[f"  student     {s:16} password {passwords[s]}   (Nbgrader > Assignment List; "
               f"JupyterLab in {LAB_LOCALES.get(s, 'en')})" for s in STUDENTS],
             f"  released    {', '.join(ASSIGNMENTS)} (Chinese and English editions)",
             f"  course directory {hub.course} (owner {INSTRUCTOR}, mode 700)",
             f"  exchange {hub.exchange}; log {hub.log}",
             "  stop it with `make hub-stop`"]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hub.control", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("HUB_PORT", DEFAULT_PORT)))
    parser.add_argument("--ip", default=os.environ.get("HUB_IP", "127.0.0.1"))
    parser.add_argument("--state", default=os.environ.get("HUB_STATE", DEFAULT_STATE))
    parser.add_argument("--exchange", default=os.environ.get("HUB_EXCHANGE", DEFAULT_EXCHANGE))
    parser.add_argument("--fresh-course", action="store_true", help="recopy the course into the instructor's home")
    args = parser.parse_args(argv)
    hub = Hub(state=args.state, exchange=args.exchange, port=args.port, ip=args.ip)
    if args.action == "stop":
        if os.geteuid() != 0 and hub.pid():
            print("the hub runs as root: stop it as root (sudo make hub-stop)")
            return 1
        had = hub.pid()
        still = hub.stop()
        print(f"hub stopped (pid {had})" if had else "no hub was running", end="")
        print(f"; still alive: {still}" if still else "; nothing left running")
        return 1 if still else 0
    if args.action == "status":
        print(f"running, pid {hub.pid()}: {hub.url}/" if hub.pid() else "not running")
        return 0
    if os.geteuid() != 0:
        print("make hub needs root: it creates the local Unix users sdpa-instructor and sdpa-student-a/b/c,\n"
              "their homes, the shared nbgrader exchange and runs JupyterHub's spawner as root.\n"
              "Nothing was done. Run `sudo make hub` (or as root).")
        return 2
    print("setting up users, exchange and course ...")
    hub.setup(fresh_course=args.fresh_course)
    print(f"generating and releasing {', '.join(ASSIGNMENTS)} ...")
    hub.release()
    print("starting JupyterHub ...")
    hub.start()
    print(_banner(hub))
    return 0


if __name__ == "__main__":
    sys.exit(main())
