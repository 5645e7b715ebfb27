"""The students' Python environment on the course's hub: ``python -m hub.student_env PATH`` (``make student-env``).

A student's Jupyter server and kernels run from a venv outside this checkout that holds what the lesson needs
(torch, numpy, matplotlib), JupyterLab with its Chinese language pack, nbgrader's student extensions (fetch and
submit), JupyterHub's single-user server and ``sdpa-check-my-work`` (the Check my work button and its forwarder),
and nothing of the grader: the hidden checks, the solutions and the sample catalogue stay in the checkout, which
the hub closes to students (``hub/control.py``).  Versions are pinned to this venv's (``pip freeze``), so the
students run what the tests ran.  Rebuilt only when what it would install changes.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("torch", "numpy", "matplotlib", "ipykernel", "matplotlib-inline", "jupyterlab", "jupyterhub", "nbgrader",
            "jupyterlab-language-pack-zh-CN")
CHECK_MY_WORK = ROOT / "labextension"
# Modules of the grader that must not be importable from the students' environment.
GRADER_MODULES = ("autograder", "course", "solutions", "catalogue")
STAMP = ".sdpa-student-env"


def _pins() -> str:
    """This venv's versions (editable installs, the course itself among them, left out)."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                            text=True, check=True).stdout
    return "".join(line + "\n" for line in frozen.splitlines()
                   if line and not line.startswith(("-e ", "#")) and "sdpa" not in line.split("==")[0].lower())


def _fingerprint(pins: str) -> str:
    digest = hashlib.sha256(pins.encode())
    for path in sorted((CHECK_MY_WORK / "sdpa_check_my_work").glob("*.py")) + \
            sorted((CHECK_MY_WORK / "build").rglob("*.js*")) + [CHECK_MY_WORK / "pyproject.toml"]:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def build(target: Path) -> None:
    pins = _pins()
    stamp = target / STAMP
    wanted = _fingerprint(pins)
    if stamp.exists() and stamp.read_text() == wanted:
        print(f"student environment up to date: {target}")
        return
    print(f"building the students' environment in {target} (torch, JupyterLab, nbgrader, Check my work; "
          "about a minute)", flush=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(target)], check=True)
    python = target / "bin" / "python"
    constraints = target / "constraints.txt"
    constraints.write_text(pins)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-warn-script-location", "-c", str(constraints),
                    *PACKAGES], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    str(CHECK_MY_WORK)], check=True, cwd="/")
    leaked = subprocess.run([str(python), "-c", "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] "
                             "if importlib.util.find_spec(m)))", *GRADER_MODULES], capture_output=True, text=True,
                            check=True, cwd="/").stdout.split()
    if leaked:
        raise SystemExit(f"the students' environment {target} can import {', '.join(leaked)}: not built")
    for path in (target, *target.rglob("*")):  # every user reads and runs it; only root writes
        if not path.is_symlink():
            os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    stamp.write_text(wanted)
    print(f"students' environment ready: {target}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m hub.student_env PATH")
    build(Path(args[0]).resolve())


if __name__ == "__main__":
    main()
