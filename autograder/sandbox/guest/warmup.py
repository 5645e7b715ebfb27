"""The zygote's warm-up: what every runner needs, imported and run once before any runner is forked."""
import gc
import os
import sys

# `python -I` leaves this directory off sys.path; the guest files import each other by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner as sandbox_runner  # noqa: E402
import source_report  # noqa: E402
from reset import restore, snapshot  # noqa: E402


def warm_up(restore_files: bool = True) -> tuple[sandbox_runner.Runner, dict[str, dict]]:
    """Import and run, once, what every runner needs; returns (runner, snapshot of its files).

    The snapshot is taken after the imports of the release's first cell (which
    every runner executes, e.g. matplotlib's font cache in /tmp/mpl) and laid
    back down after the rest of the warm-up (`restore_files`), as are the
    environment variables: a runner starts as it would stand after that first
    cell had it imported nothing before.
    """
    import io
    import warnings

    runner = sandbox_runner.new_runner()
    import matplotlib.pyplot  # noqa: F401 - after the shell exists, as the release's first cell does
    import numpy  # noqa: F401
    import torch
    import torch.nn.functional  # noqa: F401
    from matplotlib.figure import Figure

    taken, environment = snapshot() if restore_files else {}, dict(os.environ)
    odd = [rel for entries in taken.values() for rel, entry in entries.items() if entry[1] == "other"]
    if odd:
        raise RuntimeError(f"cannot snapshot links or special files in scratch or /tmp: {odd[:3]}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for device in ("cpu", "meta"):  # meta: the first op imports torch._dynamo and sympy
            for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
                q = torch.arange(24, dtype=dtype, device=device).reshape(2, 3, 4)
                k = torch.arange(40, dtype=dtype, device=device).reshape(2, 5, 4)
                scores = (q @ k.transpose(-2, -1)) / 2.0
                mask = torch.ones(3, 5, dtype=torch.bool, device=device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
                scores = scores - scores.amax(dim=-1, keepdim=True)
                weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
                torch.where(mask, torch.zeros((), dtype=dtype), weights) @ k
        # An off-screen figure (not pyplot's: nothing may wait to be shown) loads the fonts.
        fig = Figure(figsize=(3, 3))
        ax = fig.subplots()
        ax.set_title("注意力权重 attention")
        fig.colorbar(ax.imshow(torch.arange(16.0).reshape(4, 4).numpy()), ax=ax)
        ax.text(0, 0, "0.25")
        fig.savefig(io.BytesIO(), format="png")
        # Built-in softmax and attention raise from now on, in the zygote and every runner it forks; nothing
        # of the student's can lift them (``tripwires.py``).  Before the freeze: they are found by a walk.
        runner.install_tripwires()
    source_report.remember_loaded()  # every runner's report starts from these files (``source_report.py``)
    os.environ.clear()
    os.environ.update(environment)  # e.g. TORCHINDUCTOR_CACHE_DIR, set by importing torch._dynamo
    problem = restore(taken) if restore_files else ""
    if problem:
        raise RuntimeError(problem)
    # Everything so far lives as long as the zygote: out of the collector's sight, a runner's first
    # full collection does not walk torch's and matplotlib's objects nor copy the pages that hold them.
    # The collector, off while all this was imported (``zygote.py``), is on again, as in any interpreter.
    gc.collect()
    gc.freeze()
    gc.enable()
    return runner, taken

