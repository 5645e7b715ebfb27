"""``python -m catalogue``: grade the whole sample catalogue with stock nbgrader and print the figures
(``--json FILE`` also writes each sample's grades, to diff two runs); ``python -m catalogue charge-once``:
what each single-bug sample loses with each mistake charged once and with strict grading;
``python -m catalogue mistake [CODE ...]``: each declared mistake named, charged in its home part only, and told
apart from every other.

    python -m catalogue [--keep DIR] [--json FILE] [--only NAME ...]
    python -m catalogue charge-once [--markdown]
    python -m catalogue mistake [CODE ...]
"""
import argparse
import sys

from . import charge_once, figures, mistake


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m catalogue", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    figures.add_arguments(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    once = commands.add_parser("charge-once", help="points each single-bug sample loses: charged once, and strict",
                               description=charge_once.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    charge_once.add_arguments(once)
    own = commands.add_parser("mistake", help="each declared mistake named, charged in its home part only, told apart",
                              description=mistake.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mistake.add_arguments(own)
    args = parser.parse_args(argv)
    if args.command == "charge-once":
        return charge_once.main(args)
    if args.command == "mistake":
        return mistake.main(args)
    return figures.main(args)


if __name__ == "__main__":
    sys.exit(main())
