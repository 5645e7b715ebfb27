"""JupyterHub deployment of the course (`make hub`): see hub/control.py."""
