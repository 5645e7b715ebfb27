"""``python -m catalogue``: grade the whole sample catalogue with stock nbgrader and print the figures.

Usage: python -m catalogue [--keep DIR] [--json FILE] [--only NAME ...]

Prints one line per sample (kind, expectation, score, codes named, seconds,
verdict) and the summary: catch rate (buggy samples that lose points),
diagnosis rate (buggy samples whose expected codes the feedback names),
attacks held, correct variants at full marks, and seconds per submission.
Exits non-zero if any sample is not graded as expected.

``--json FILE`` also writes what each sample got, so that two runs (of
two commits, say) can be diffed::

    {sample name: {"cells": {grade_id: [score, max_score]}, "codes": [codes the feedback names]}}

(no timings in it: the same grades give the same file).  ``--only NAME ...`` grades just those samples
(a minute for a few, where the whole catalogue takes ten): to try a new sample or attack before the suite.
"""
import json
import tempfile
from pathlib import Path

import catalogue
from autograder.demo import course
from autograder.grading import record


def add_arguments(parser):
    parser.add_argument("--keep", metavar="DIR", help="grade in this directory and keep it (default: a temporary one)")
    parser.add_argument("--json", metavar="FILE", help="write {sample: {cells: {grade_id: [score, max_score]}, "
                                                       "codes: [...]}} here, to diff two runs")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="grade only these samples")


def figures(cells_by_sample: dict, codes_by_sample: dict) -> dict:
    """What ``--json`` writes: per sample, each cell's [score, max_score] and the codes named (sorted)."""
    return {name: {"cells": {grade_id: [score, top] for grade_id, (score, top) in sorted(cells.items())},
                   "codes": sorted(codes_by_sample.get(name, ()))}
            for name, cells in cells_by_sample.items()}


def main(args) -> int:
    named = {}
    samples = catalogue.CATALOGUE
    if getattr(args, "only", None):
        unknown = sorted(set(args.only) - {s.name for s in samples})
        if unknown:
            print(f"no such sample: {', '.join(unknown)} (the names are in catalogue/*.py)")
            return 2
        samples = [s for s in samples if s.name in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        root = course.make_course(Path(args.keep or tmp) / "course")
        grades, seconds, _, _ = course.grade_samples(root, samples)
        rows, tally = [], {}
        for sample in samples:
            cells = grades.get(sample.name, {})
            report = course.grading_report(root, sample.name) if cells else {}
            shown = sorted(record.codes_named(report))
            named[sample.name] = shown
            ok, why = catalogue.verdict(sample, cells, shown, record.held_points(report)) if cells else (
                False, "not graded")
            earned = sum(s or 0 for s, _ in cells.values())
            caught = sample.kind != "bug" or earned < sum(m for _, m in cells.values())
            diagnosed = set(sample.codes) <= set(shown)
            tally.setdefault(sample.kind, []).append((ok, caught, diagnosed))
            possible = sum(m for _, m in cells.values())
            rows.append((sample.name, sample.kind, sample.expect, f"{earned:g}/{possible:g}", ",".join(shown) or "-",
                         f"{report.get('seconds', 0):.1f}s", "ok" if ok else "UNEXPECTED: " + why))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:6], widths)), row[6])
    bugs, attacks, correct = tally.get("bug", []), tally.get("attack", []), tally.get("correct", [])
    fair = tally.get("fairness", [])
    print(f"\ncatch rate:      {sum(c for _, c, _ in bugs)}/{len(bugs)} buggy samples lose points")
    print(f"diagnosis rate:  {sum(d for _, _, d in bugs)}/{len(bugs)} buggy samples get their expected code")
    print(f"attacks held:    {sum(o for o, _, _ in attacks)}/{len(attacks)}")
    print(f"correct variants at full marks: {sum(o for o, _, _ in correct)}/{len(correct)}")
    print(f"unusual answer forms at full marks: {sum(o for o, _, _ in fair)}/{len(fair)}")
    evidence = {s.name for s in catalogue.EVIDENCE}
    print("evidence, bounds and clean-start samples: " + ", ".join(
        f"{row[0]} ({'held' if row[6] == 'ok' else 'FAILED'})" for row in rows if row[0] in evidence))
    print(f"grading time:    {seconds / len(samples):.2f} s per submission "
          f"(stock nbgrader autograde, {len(samples)} submissions, {seconds:.0f} s)")
    if args.json:
        cells = {s.name: grades.get(s.name, {}) for s in samples}
        Path(args.json).write_text(json.dumps(figures(cells, named), indent=1, ensure_ascii=False) + "\n")
    return 0 if all(r[6] == "ok" for r in rows) else 1
