"""``python -m benchmarks <command>``: the grading engine's benchmarks, run from the repository root.

``python -m benchmarks <command> --help`` says what a command measures and why, and lists its flags.
"""
import argparse
import importlib
import sys

from autograder.cli import NBGRADER_OPTION

# command -> module of this package (each has add_arguments(parser) and run(args) -> exit status)
COMMANDS = {
    "class": "grade_class",
    "profile": "stage_profile",
    "cold-start": "cold_start",
    "memory": "memory",
    "load": "load",
    "sandbox-cost": "sandbox_cost",
    "fresh-runner-cost": "fresh_runner_cost",
    "guard-cost": "guard_cost",
    "cell-times": "cell_times",
    "torch-threads": "torch_threads",
    "check-service": "check_service",
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"{__package__}.{module_name}")
        doc = module.__doc__ or ""
        sub = commands.add_parser(name, help=_summary(doc), description=doc,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(module=module)
    return top


def _summary(doc: str) -> str:
    """The first sentence of a command module's docstring, without its ``python -m benchmarks X``: prefix."""
    first = " ".join(doc.split("\n\n")[0].split())
    return first.split(": ", 1)[-1] if first.startswith("``") else first


def main(argv=None) -> int:
    top = parser()
    args, extra = top.parse_known_args(argv)
    accepts = getattr(args.module, "ACCEPTS_NBGRADER_OPTIONS", False)
    bad = [a for a in extra if not (accepts and NBGRADER_OPTION.match(a))]
    if bad:
        top.error(f"unrecognized arguments: {' '.join(bad)}")
    args.nbgrader_args = extra
    return args.module.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
