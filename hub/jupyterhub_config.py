"""JupyterHub configuration of the sdpa course (started by hub/control.py, `make hub`).

Logins are the course's local Unix users (PAM); each user's server is a JupyterLab started by
LocalProcessSpawner as that user, with this repository's venv (nbgrader and torch) and the
per-role Jupyter config that hub/control.py wrote (nbgrader exchange, course directory,
which nbgrader extensions are on).
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
    "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
    "JUPYTER_CONFIG_PATH": _config_path,
    "SDPA_EXCHANGE_ROOT": settings["exchange"],  # read by the course's nbgrader_config.py
    "LANG": "C.UTF-8",
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
}
