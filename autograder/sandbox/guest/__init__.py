"""The only files mounted into the sandbox: the zygote (the guest's program) and the modules it imports.

They run as the student's process, so they use the standard library and
torch only, import each other by plain module name (``import wire``), and
decide nothing about a grade.  The trusted side imports `wire` from here to
read what they send, and `forbidden` to read the same forbidden families.
"""
from pathlib import Path

GUEST_DIR = Path(__file__).resolve().parent
RUNNER = GUEST_DIR / "runner.py"
ZYGOTE = GUEST_DIR / "zygote.py"
WIRE = GUEST_DIR / "wire.py"
PROCFS = GUEST_DIR / "procfs.py"
FORBIDDEN = GUEST_DIR / "forbidden.py"
TRIPWIRES = GUEST_DIR / "tripwires.py"
MESSAGES = GUEST_DIR / "messages.py"
SOURCE_REPORT = GUEST_DIR / "source_report.py"
NO_PROGRAMS = GUEST_DIR / "no_programs.py"
# The C++ kernel tripwires, built on the trusted side from kernel_tripwires.cpp (``sandbox/kernel_tripwires.py``).
KERNEL_TRIPWIRES = GUEST_DIR / "kernel_tripwires.so"
ZYGOTE_PARTS = tuple(GUEST_DIR / name for name in ("warmup.py", "reset.py", "selfcheck.py", "uids.py"))
# Mounted read-only; nothing else of this package is.
FILES = (RUNNER, ZYGOTE, WIRE, PROCFS, FORBIDDEN, TRIPWIRES, MESSAGES, SOURCE_REPORT, NO_PROGRAMS, KERNEL_TRIPWIRES,
         *ZYGOTE_PARTS)
