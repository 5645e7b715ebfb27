"""A uid of its own for each runner (root mode, ``launcher.ZYGOTE_CAPS``): drawn, switched to, checked."""
import ctypes
import os
import resource
import sys

# `python -I` leaves this directory off sys.path; the guest files import each other by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selfcheck import status  # noqa: E402

CAP_SETUID = 7
UIDS = (0x5A000000, 1 << 20)  # (base, span) of the runners' uids when no arguments say (launcher.UID_BASE/SPAN)

_libc = ctypes.CDLL(None, use_errno=True)


def switch_uid(uid: int, taken: dict[str, dict], nproc: int, structure: dict[str, dict]) -> None:
    """As root, in the child: hand the writable places to `uid`, become it, drop every capability.

    As in a fresh sandbox, scratch and what the runner's own start-up left in
    /tmp and /dev/shm belong to the runner; /tmp and /dev/shm themselves, and
    the directories bwrap made there (`structure`), stay root's.
    """
    scratch = os.getcwd()
    for top, entries in taken.items():
        made_by_bwrap = structure.get(top, {}) if top != scratch else {}
        for rel in entries:
            if top == scratch or (rel and rel not in made_by_bwrap):
                os.lchown(os.path.join(top, rel) if rel else top, uid, uid)
    caps = (ctypes.c_uint32 * 8)(0x20080522, 0)  # capget header (v3) + 2 x (eff, prm, inh)
    if _libc.capget(caps, ctypes.byref(caps, 8)) == 0:
        caps[4] = caps[7] = 0  # inheritable: empty, as in a fresh runner
        _libc.capset(caps, ctypes.byref(caps, 8))
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # from uid 0 to none: the kernel clears every capability
    fields = status()
    if (os.getresuid(), os.getresgid(), os.getgroups()) != ((uid,) * 3, (uid,) * 3, []) or any(
            int(fields.get(key, "1"), 16) for key in ("CapInh", "CapPrm", "CapEff", "CapAmb")):
        raise RuntimeError(f"the runner kept privileges: {fields}")
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if nproc >= 0:
        nproc = nproc if hard == resource.RLIM_INFINITY else min(nproc, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))  # now counts this runner's uid alone


def switches_uids():
    """Root with CAP_SETUID (root mode, ``launcher.ZYGOTE_CAPS``): each runner gets a uid of its own."""
    return os.getuid() == 0 and int(status().get("CapEff", "0"), 16) & (1 << CAP_SETUID) != 0


def new_uid(uids, last):
    base, span = uids
    while True:
        uid = base + int.from_bytes(os.urandom(4), "little") % span
        if uid != last:
            return uid
