"""GPU check of the hidden suite: `make gpu-check` (no network, a few minutes).

On a machine with CUDA it
1. compares the reference solution and a set of device/dtype mutants on CUDA
   tensors (float32, float16, bfloat16) with F.scaled_dot_product_attention
   computed in float64, using tolerances derived from the same-precision
   reference (as PyTorch's SDPA tests do), and prints a table
   (check, dtype, max error, tolerance, verdict);
2. runs the hidden suite with CUDA checks enabled for the same submissions
   and checks the scores: reference full marks, each mutant loses the
   device/dtype points;
and exits non-zero on any unexpected verdict.  Without CUDA it says so and
exits 0.  Everything here runs our own (trusted) code in-process.
"""
import sys
import time

import torch

from autograder.grading import cases, tolerances
from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace

MUTANTS = {
    "cpu-fill (device-mismatch)": '''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    fill = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)
    return torch.where(mask, scores, fill)
''',
    "cpu-causal-mask (device-mismatch)": '''
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool).tril()
''',
    "hard-coded float32 (dtype-changed)": '''
def scale_scores(scores, d_k):
    return scores.float() / math.sqrt(d_k)
''',
    "-1e9 fill (half-overflow)": '''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    return scores.masked_fill(~mask, -1e9)
''',
}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def namespace_for(name):
    namespace = reference_namespace()
    if name != "reference":
        exec(MUTANTS[name], namespace)  # noqa: S102 - our own mutants
    return namespace


def direct_rows(name, namespace, device):
    """One row per dtype: the student's attention on CUDA vs float64 F.sdpa."""
    rng = torch.Generator().manual_seed(0)
    q, k, v = cases.qkv(rng, batch=(2, 4), L=16, S=24, d_k=32, d_v=16)
    random_mask = cases.random_bool_mask(rng, (16, 24), full_row=5)
    mask = random_mask & torch.ones(16, 24, dtype=torch.bool).tril()
    rows = []
    for dtype in DTYPES:
        args = cases.cast((q, k, v, mask), dtype)
        ref64, _ = cases.sdpa(*cases.cast(args, torch.float64))
        tol = cases.tolerance(cases.sdpa, cases.cast(args, torch.float64), dtype)
        try:
            gpu_args = [a.to(device) for a in args[:3]]
            gpu_args.append(random_mask.to(device) & namespace["causal_mask"](16, 24, device=device))
            out, _ = namespace["scaled_dot_product_attention"](*gpu_args)
            problems = []
            if out.device.type != "cuda":
                problems.append(f"device {out.device}")
            if out.dtype != dtype:
                problems.append(f"dtype {out.dtype}")
            error = tolerances.max_error(out.detach().cpu().double(), ref64)
            passed = not problems and tolerances.close(out.detach().cpu().double(), ref64, tol)
            rows.append((name, str(dtype).replace("torch.", ""), f"{error:.2e}", tol.describe(),
                         "pass" if passed else "FAIL " + ", ".join(problems)))
        except Exception as exc:  # noqa: BLE001 - a mutant is expected to blow up here
            rows.append((name, str(dtype).replace("torch.", ""), "-", tol.describe(),
                         f"FAIL {type(exc).__name__}: {str(exc).splitlines()[0][:60]}"))
    return rows


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description="GPU check of the hidden suite")
    parser.add_argument("--dry-run-on-cpu", action="store_true",
                        help="exercise the script on the CPU (prints the table, judges nothing)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() and not args.dry_run_on_cpu:
        print("gpu-check: no CUDA device here (torch.cuda.is_available() is False); nothing to check. "
              "Run `make gpu-check` on a machine with an NVIDIA GPU.")
        return 0
    device = "cpu" if args.dry_run_on_cpu else "cuda"
    name = "CPU (dry run)" if args.dry_run_on_cpu else torch.cuda.get_device_name(0)
    print(f"gpu-check on {name}, torch {torch.__version__}")
    started = time.perf_counter()
    unexpected, rows = [], []
    for mutant in ["reference"] + list(MUTANTS):
        mine = direct_rows(mutant, namespace_for(mutant), device)
        rows += mine
        failed = [r for r in mine if r[4] != "pass"]
        if (mutant == "reference") == bool(failed):
            unexpected.append(f"{mutant}: {'failed' if failed else 'passed every dtype'}")
    header = ("check", "dtype", "max error", "tolerance", "verdict")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    for row in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))

    print("\nhidden suite with CUDA checks enabled:")
    parts = ["device_dtype", "scaled_dot_product_attention", "softmax", "apply_mask"]
    device_map = {"cuda": "cpu"} if args.dry_run_on_cpu else None
    for mutant in ["reference"] + list(MUTANTS):
        results = run_checks(LocalStudent(namespace_for(mutant), device_map=device_map), parts,
                             seed_key=("sdpa", "gpu-check"), context={"cuda": True})
        part = results["device_dtype"]
        cuda = [c for c in part.checks if c.name == "test_cuda_when_present"]
        print(f"  {mutant:36s} device_dtype {part.points:g}/{part.max_points:g}  codes {part.codes}  "
              f"CUDA check {'pass' if cuda and cuda[0].passed else 'FAIL'}")
        if (mutant == "reference") != (part.points == part.max_points):
            unexpected.append(f"{mutant}: device_dtype {part.points:g}/{part.max_points:g}")
    print(f"\n{time.perf_counter() - started:.1f} s")
    if args.dry_run_on_cpu:
        print("dry run: verdicts not judged (CPU tensors cannot show device bugs)")
        return 0
    if unexpected:
        print("UNEXPECTED:", *unexpected, sep="\n  ")
        return 1
    print("all verdicts as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
