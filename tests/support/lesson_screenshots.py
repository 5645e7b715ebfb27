"""Screenshots of lesson sections as a student sees them in JupyterLab (headless Debian Chromium).

Executes the released notebook (stubs unanswered, as a student first runs it),
opens it in a private JupyterLab and photographs whole sections: the cells from
a markdown cell with a given grade_id up to the next section.  Images go to
``.artifacts/lesson/``.  For looking at the lesson as a student does while
writing it; it measures nothing and ``make`` does not run it, so it lives
beside the browser tests' helpers.

Usage: python -m tests.support.lesson_screenshots [--solved]
  --solved  run the solution notebook instead (answers filled in)
"""
import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".artifacts" / "lesson"
CHROMIUM = "/usr/bin/chromium"
# name -> (first grade_id, grade_id of the last cell shown)
SECTIONS = {
    "why-scale": ("why-scale-md", "why-scale-check"),
    "debugging": ("debug-md", "fixed_attention-check"),
    "causal-alignment": ("causal-align-md", "causal-align-check"),
    "mha-mask": ("mha-mask-md", "mha-mask-check"),
    "empty-rows": ("empty-rows-md", "empty-rows-check"),
    "dropout": ("dropout-md", "dropout-check"),
    "glossary": ("prerequisites", "glossary"),
}


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _grade_ids(nb):
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solved", action="store_true")
    args = parser.parse_args()
    source = ROOT / ("solutions/sdpa_solution.ipynb" if args.solved else "assignments/sdpa/sdpa.ipynb")
    suffix = "-solved" if args.solved else ""
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        nb = nbformat.read(str(source), as_version=4)
        NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(tmp)}}).execute()
        nbformat.write(nb, str(tmp / "sdpa.ipynb"))
        home = tmp / "home"
        settings = home / "settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        port, token = _free_port(), secrets.token_hex(16)
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"))
        cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--port", str(port),
               f"--ServerApp.token={token}", f"--ServerApp.root_dir={tmp}", "--ServerApp.ip=127.0.0.1",
               f"--LabApp.user_settings_dir={home / 'settings'}", f"--LabApp.workspaces_dir={home / 'ws'}"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(tmp / "lab.log", "w") as log:
            proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5)
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit((tmp / "lab.log").read_text()[-3000:]) from None
                    time.sleep(0.5)
            ids = _grade_ids(nb)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox",
                                                                            "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1300, "height": 2400})
                page.set_default_timeout(120_000)
                page.goto(f"http://127.0.0.1:{port}/lab/tree/sdpa.ipynb?token={token}")
                cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
                cells.nth(len(ids) - 1).wait_for(state="attached")
                page.wait_for_timeout(3000)
                for name, (first, last) in SECTIONS.items():
                    start, stop = ids.index(first), ids.index(last)
                    # JupyterLab renders cells lazily: shoot cell by cell (each fits the tall viewport)
                    path = OUT / f"{name}{suffix}.png"
                    _shoot_range(page, [cells.nth(i) for i in range(start, stop + 1)], path)
                    print(path.relative_to(ROOT))
                browser.close()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _shoot_range(page, cells, path):
    """One image of consecutive cells: each cell shot on its own, stacked vertically."""
    from PIL import Image

    parts = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, cell in enumerate(cells):
            cell.scroll_into_view_if_needed()
            page.wait_for_timeout(200)
            shot = Path(tmp) / f"{n}.png"
            cell.screenshot(path=str(shot))
            parts.append(Image.open(shot).convert("RGB"))
        width = max(im.width for im in parts)
        image = Image.new("RGB", (width, sum(im.height for im in parts)), "white")
        y = 0
        for im in parts:
            image.paste(im, (0, y))
            y += im.height
        image.save(path)


if __name__ == "__main__":
    main()
