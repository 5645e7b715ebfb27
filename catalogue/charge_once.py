"""``python -m catalogue charge-once``: points each single-bug sample loses, with each mistake charged once and
with strict end-to-end grading.

Usage: python -m catalogue charge-once [--markdown | --write-doc | --check-doc]

``--write-doc`` writes the per-sample table and its totals into ``docs/design/charging.md`` (between the
markers there); ``--check-doc`` exits 1 when that table is stale (``tests/test_docs.py`` runs it).

Then, for each attack on charge-once (``catalogue/charging.py``), its score beside its honest
counterpart's (or, for two mistakes, each mistake alone's).

Runs the hidden checks in this process (trusted: our own buggy samples, no
sandbox) on the reference solution with one sample's answer cells swapped in,
once with ``charge_once`` (the default: ``TrustedScoring.charge_each_mistake_once``)
and once strict, and prints per sample: the points lost in each mode, the
parts that lost them, and the root-cause line the feedback shows.
"""
import sys

import nbformat

from autograder.demo.submissions import BUGS, ROOT, Sample
from autograder.grading import root_causes
from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace
from autograder.notebook.cells import is_test_cell, part_of

SOURCE = ROOT / "source" / "sdpa" / "sdpa.ipynb"
DOC = ROOT / "docs" / "design" / "charging.md"
BEGIN = "<!-- charge-once table: written by `python -m catalogue charge-once --write-doc` -->"
END = "<!-- end of the charge-once table -->"


def parts():
    nb = nbformat.read(str(SOURCE), as_version=4)
    return [p for p in (part_of(c) for c in nb.cells if is_test_cell(c)) if p]


def grade(sample, order, charge_once):
    namespace = reference_namespace()
    for source in sample.replace.values():
        exec(source, namespace)  # noqa: S102 - our own buggy samples
    student = LocalStudent(namespace)
    results = run_checks(student, order, seed_key=("sdpa", sample.name), context={"charge_once": charge_once})
    lost = {p: r.max_points - r.points for p, r in results.items() if r.points < r.max_points}
    return lost, results


def add_arguments(parser):
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--write-doc", action="store_true", help=f"write the table into {DOC.relative_to(ROOT)}")
    parser.add_argument("--check-doc", action="store_true", help="exit 1 when that table is stale")


def single_bug_rows(order):
    """(sample, lost strict, where strict, lost once, where once, root causes) per single-bug sample."""
    single = [s for s in BUGS if len(s.replace) == 1 and not s.append and s.edit is None
              and not {"softmax-builtin", "sdpa-builtin"} & set(s.codes)]
    rows = []
    for sample in single:
        strict, _ = grade(sample, order, False)
        once, results = grade(sample, order, True)
        causes = root_causes.root_causes(results, order)
        line = "; ".join(f"[{c['code']}] in {c['home']}" + (f" (also {', '.join(c['also'])})" if c["also"] else "")
                         for c in causes) or "-"
        rows.append((sample.name, f"{sum(strict.values()):g}", ", ".join(f"{p} {v:g}" for p, v in strict.items()),
                     f"{sum(once.values()):g}", ", ".join(f"{p} {v:g}" for p, v in once.items()), line))
    return rows


def doc_table(rows) -> str:
    """The table and totals `docs/design/charging.md` shows (points do not depend on the machine)."""
    lines = ["| sample | lost (strict) | lost (once) | where (once) |", "|---|---|---|---|"]
    lines += [f"| {name} | {strict} | {once} | {where} |" for name, strict, _, once, where, _ in rows]
    homes = sum(1 for row in rows if row[4] and "," not in row[4])
    lines += ["", f"{homes} of the {len(rows)} single-bug samples lose points in one part only. Together they lose "
                  f"{sum(float(r[1]) for r in rows):g} points strict and {sum(float(r[3]) for r in rows):g} charged "
                  "once."]
    return "\n".join(lines)


def _doc(rows, write) -> int:
    text = DOC.read_text(encoding="utf-8")
    head, found, rest = text.partition(BEGIN)
    old, found_end, tail = rest.partition(END)
    if not (found and found_end):
        print(f"{DOC.relative_to(ROOT)} has no charge-once markers", file=sys.stderr)
        return 1
    new = f"{head}{BEGIN}\n{doc_table(rows)}\n{END}{tail}"
    if write:
        DOC.write_text(new, encoding="utf-8")
        return 0
    if new != text:
        print(f"{DOC.relative_to(ROOT)}'s charge-once table is stale: run `python -m catalogue charge-once "
              "--write-doc`", file=sys.stderr)
        return 1
    return 0


def main(args) -> int:
    order = parts()
    if args.write_doc or args.check_doc:
        return _doc(single_bug_rows(order), args.write_doc)
    # Built-in APIs are charged by reading the code (TrustedScoring's static scan), not by these checks.
    rows = single_bug_rows(order)
    head = ("sample", "lost (strict)", "where (strict)", "lost (once)", "where (once)", "先修这里")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in rows:
            print("  ".join(row))
    total_strict = sum(float(r[1]) for r in rows)
    total_once = sum(float(r[3]) for r in rows)
    print(f"\n{len(rows)} single-bug samples: {total_strict:g} points lost in strict mode, {total_once:g} charged once")
    _attacks(order, args.markdown)
    return 0


def _score(replace, key, order):
    sample = Sample(key, "attack", "partial", replace)
    _, results = grade(sample, order, True)
    return sum(r.points for r in results.values())


def _attacks(order, markdown):
    """Each attack on charge-once (``catalogue/charging.py``) against its honest counterpart, charged once."""
    from .charging import CHARGING, HONEST, TWO_MISTAKES

    bugs = {s.name: s for s in BUGS}
    rows = []
    for sample in CHARGING:
        if sample.name in HONEST:
            counterpart = bugs[f"bug-{HONEST[sample.name]}"]
            against = [(counterpart.name, _score(counterpart.replace, sample.name, order))]
        elif sample.name in TWO_MISTAKES:
            against = [(f"{cell} alone", _score({cell: source}, sample.name, order))
                       for cell, source in sample.replace.items()]
        else:
            continue
        score = _score(sample.replace, sample.name, order)
        verdict = "ok" if all(score <= other for _, other in against) else "GAIN"
        rows.append((sample.name, f"{score:g}", ", ".join(f"{n} {s:g}" for n, s in against), verdict))
    head = ("attack", "score (once)", "counterpart", "verdict")
    print()
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |" if markdown else "  ".join(row))
