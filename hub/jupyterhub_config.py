"""JupyterHub configuration of the sdpa course (started by hub/control.py, `make hub`).

Logins are the course's local Unix users (PAM); each user's server is a JupyterLab started by
LocalProcessSpawner as that user, with the per-role Jupyter config that hub/control.py wrote
(nbgrader exchange, course directory, which nbgrader extensions are on): the instructor's from this
repository's venv (nbgrader, the grader), a student's from the students' own venv (hub/student_env.py),
which holds nothing of the grader.
"""
import json
import os

settings = json.loads(open(os.environ["SDPA_HUB_SETTINGS"]).read())
state = settings["state"]
venv_bin = settings["venv_bin"]

c = get_config()  # noqa: F821

c.JupyterHub.bind_url = f"http://{settings['ip']}:{settings['port']}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["hub_port"]
c.JupyterHub.db_url = f"sqlite:///{os.path.join(state, 'jupyterhub.sqlite')}"
c.JupyterHub.cookie_secret_file = os.path.join(state, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(state, "jupyterhub-self.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every user's server
c.ConfigurableHTTPProxy.command = [settings["proxy"]]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings['api_port']}"
c.ConfigurableHTTPProxy.pid_file = os.path.join(state, "proxy.pid")

c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(settings["users"])
c.Authenticator.admin_users = {settings["admin"]}

c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [os.path.join(venv_bin, "jupyterhub-singleuser")]


def _bin(spawner):
    return venv_bin if spawner.user.name == settings["admin"] else settings["student_bin"]


def _student_environment(spawner):
    """A student's server (and so their kernels) runs from the students' venv."""
    spawner.cmd = [os.path.join(_bin(spawner), "jupyterhub-singleuser")]


c.Spawner.pre_spawn_hook = _student_environment
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
# A loaded 2-core machine needs more than the 60 s / 30 s defaults to start a server.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180


def _config_path(spawner):
    role = "instructor" if spawner.user.name == settings["admin"] else "student"
    return os.path.join(state, "jupyter", role)


c.Spawner.environment = {
    # nbgrader shells out to `alembic`: the venv's bin first on PATH.
    "PATH": lambda spawner: f"{_bin(spawner)}:/usr/local/bin:/usr/bin:/bin",
    "JUPYTER_CONFIG_PATH": _config_path,
    "SDPA_EXCHANGE_ROOT": settings["exchange"],  # read by the course's nbgrader_config.py
    "LANG": "C.UTF-8",
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
}

# The check service ("Check my work"), when hub/control.py set it up: a hub-managed service that runs as its own
# Unix user and reads the course (an ACL: read-only), reached by each user's server with the server's own token.
check = settings.get("check_service")
if check:
    c.JupyterHub.services = [{
        "name": check["name"],
        "url": f"http://127.0.0.1:{check['port']}",
        "user": check["user"],
        "cwd": check["home"],
        "command": [os.path.join(venv_bin, "python"), "-m", "autograder.service", check["course"],
                    "--per-hour", str(check["per_hour"]), "--records", check["records"],
                    *(["--show-points"] if check.get("show_points") else []),
                    *(["--allow-after-due"] if check.get("allow_after_due") else [])],
        "environment": {"PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": check["home"],
                        "TMPDIR": check["home"],  # the grader's scratch files in its own home (mode 700)
                        "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
                        "SDPA_EXCHANGE_ROOT": settings["exchange"]},  # read by the course's nbgrader_config.py
        "oauth_no_confirm": True,
    }]
    access = f"access:services!service={check['name']}"
    # Every user may reach the service; the service itself decides what each may read.
    c.JupyterHub.load_roles = [{"name": "user", "scopes": ["self", access]}]
    # The token in each user's server ($JUPYTERHUB_API_TOKEN): the defaults, plus reaching the check service.
    c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", access]
    c.Spawner.environment["SDPA_CHECK_URL"] = f"http://127.0.0.1:{check['port']}/services/{check['name']}/"
