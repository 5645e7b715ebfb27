"""No program can be started from a runner (`guest/no_programs.py`): a seccomp filter the process cannot lift.

Red team: `_posixsubprocess.fork_exec`, the C half of `subprocess`, raises no audit event; it started a fresh
interpreter, with no tripwires and no hook, that computed `torch.softmax` for every hidden check (105/105).
"""
import pytest

from autograder.sandbox.session import Budget, StudentSession

CELLS = ["import os, subprocess, sys",
         # subprocess starts its child by `_posixsubprocess.fork_exec`, which raises no audit event
         "try:\n    subprocess.run([sys.executable, '-c', 'pass'])\n    by_subprocess = 'ran'\n"
         "except OSError as e:\n    by_subprocess = type(e).__name__",
         "try:\n    os.execv(sys.executable, [sys.executable, '-c', 'pass'])\nexcept OSError as e:\n"
         "    by_execv = type(e).__name__",
         "forked = os.fork()\nif forked == 0:\n    os._exit(3)\nforked_status = os.waitpid(forked, 0)[1] >> 8"]


def test_a_runner_starts_no_program_by_any_route_and_still_forks():
    with StudentSession(CELLS, budget=Budget(cell_timeout=60, call_timeout=30)) as session:
        outputs = session.run_notebook()
        assert session.get("by_subprocess") == "PermissionError", outputs
        assert session.get("by_execv") == "PermissionError", outputs
        assert session.get("forked_status") == 3  # a fork (the same image: tripwires, hook) is no program


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_exactly_the_calls_that_start_a_program(machine):
    """The BPF program, run here on each machine's numbers: exec calls and a foreign ABI refused, all else allowed."""
    from autograder.sandbox.guest import no_programs

    arch, calls, foreign = no_programs._MACHINES[machine]
    program = no_programs._filter(arch, calls, foreign)

    def run(nr, on_arch):
        data = {no_programs._NR: nr, no_programs._ARCH: on_arch}
        pc, acc = 0, 0
        while True:
            code, jt, jf, k = program[pc]
            if code == no_programs._LD_W_ABS:
                acc, pc = data[k], pc + 1
            elif code in (no_programs._JEQ_K, no_programs._JGE_K):
                hit = acc == k if code == no_programs._JEQ_K else acc >= k
                pc += 1 + (jt if hit else jf)
            else:
                return k

    refused = no_programs.SECCOMP_RET_ERRNO | no_programs.EPERM
    assert all(run(nr, arch) == refused for nr in calls)
    assert run(0, arch) == run(57, arch) == run(56, arch) == run(435, arch) == no_programs.SECCOMP_RET_ALLOW
    assert run(calls[0], 0x40000003) == refused  # another architecture's entry
    if foreign is not None:
        assert run(foreign + calls[0], arch) == refused
