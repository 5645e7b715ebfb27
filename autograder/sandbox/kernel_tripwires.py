"""Builds the C++ kernel tripwires (``guest/kernel_tripwires.cpp``) against the installed torch.

The runner loads the built module in its warm-up to make the built-in softmax and attention kernels
throw, with no Python object that could deregister them (``docs/design/sandbox.md``, "No off switch").
It is built once per torch version and source, here on the trusted side (the sandbox has no compiler
and cannot write the guest directory), into the guest directory, which is mounted read-only.  Without it
no runner starts: grading refuses with the compiler's own message rather than run with weaker guards.

    python -m autograder.sandbox.kernel_tripwires      # build now (``make install`` does)
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from . import launcher
from .guest import GUEST_DIR, KERNEL_TRIPWIRES

SOURCE = GUEST_DIR / "kernel_tripwires.cpp"
MODULE = KERNEL_TRIPWIRES  # the name the guest imports (`import kernel_tripwires`)
STAMP = GUEST_DIR / "kernel_tripwires.so.key"  # what MODULE was built from
BUILD_SECONDS = 600  # a compile that takes longer than this is stuck


class BuildError(launcher.SandboxUnavailableError):
    """The kernel tripwires cannot be built here: grading refuses to start a runner without them."""


def _torch():
    import torch
    import torch.utils.cpp_extension as extension

    return torch, extension


def build_key() -> str:
    """What the module depends on: the source, the installed torch (its version file and its C++ library,
    which carries the ABI) and this Python.  Read from torch's files, without importing torch: a grading
    command checks this before it starts its zygote, which must come before torch's import."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError("torch is not installed in this Python: the kernel tripwires are built against it")
    top = Path(next(iter(spec.submodule_search_locations))).resolve()
    library = next((p for p in sorted((top / "lib").glob("libtorch_cpu.*"))), None)
    shown = library.stat() if library else None
    parts = (SOURCE.read_bytes(), (top / "version.py").read_bytes() if (top / "version.py").exists() else b"",
             f"{shown.st_size}:{shown.st_mtime_ns}".encode() if shown else b"", sys.version.encode(),
             top.as_posix().encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def command(output: os.PathLike) -> list[str]:
    """The compiler's command line: torch's headers and libraries, no Python library (an extension)."""
    torch, extension = _torch()
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not compiler:
        raise BuildError("no C++ compiler (g++) to build the kernel tripwires: install g++ "
                         "(Debian: apt-get install g++), then run `python -m autograder.sandbox.kernel_tripwires`")
    includes = [f"-I{path}" for path in extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    libraries = [flag for path in extension.library_paths() for flag in (f"-L{path}", f"-Wl,-rpath,{path}")]
    return [compiler, "-O1", "-shared", "-fPIC", "-std=c++17", "-w",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            *includes, str(SOURCE), "-o", str(output), *libraries, "-lc10", "-ltorch_cpu", "-ltorch_python"]


def is_built() -> bool:
    try:
        return MODULE.is_file() and STAMP.read_text() == build_key()
    except OSError:
        return False


def ensure_built(say=None) -> Path:
    """The built module, built first if missing or built for another torch; raises `BuildError`."""
    if is_built():
        return MODULE
    place = MODULE.parent
    try:
        lock = open(place / ".kernel_tripwires.lock", "w")
    except OSError as exc:
        raise BuildError(f"cannot build the kernel tripwires in {place} ({exc.strerror}): run `python -m "
                         "autograder.sandbox.kernel_tripwires` as the user who installed the course") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another grading process may be building it now
        if is_built():
            return MODULE
        if say:
            say(f"building the kernel tripwires for torch (once, about 20 seconds): {MODULE}")
        with tempfile.TemporaryDirectory(dir=place, prefix=".build-") as work:
            output = Path(work) / MODULE.name
            try:
                done = subprocess.run(command(output), capture_output=True, text=True, timeout=BUILD_SECONDS)
            except subprocess.TimeoutExpired as exc:
                raise BuildError(f"building the kernel tripwires took over {BUILD_SECONDS} s") from exc
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
                raise BuildError(f"the C++ compiler could not build {SOURCE.name}: {last}")
            os.chmod(output, 0o644)  # world-readable: a runner under another uid loads it
            os.replace(output, MODULE)
        STAMP.write_text(build_key())
        STAMP.chmod(0o644)
    return MODULE


def main() -> int:
    try:
        path = ensure_built(say=print)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"kernel tripwires: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
