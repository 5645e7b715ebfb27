"""The class report's "while working" section, from the check service's record beside the gradebook."""
from autograder import i18n, report
from autograder.service.records import Records, default_path


def _row(student, codes):
    return report.StudentRow(student, 100.0, 110.0, 100.0, 105.0, True, 0.0, codes=codes)


def test_the_report_counts_who_met_a_mistake_while_working_and_who_fixed_it(tmp_path):
    stored = Records(default_path(tmp_path))
    inverted = {"parts": [{"part": "apply_mask", "passes": False}], "codes": ["mask-inverted"]}
    passing = {"parts": [{"part": "apply_mask", "passes": True}], "codes": []}
    stored.add("ana", "sdpa", "answered", inverted, at=1)
    stored.add("ana", "sdpa", "answered", passing, at=2)
    stored.add("ben", "sdpa", "answered", inverted, at=3)
    stored.add("cai", "sdpa_en", "answered", inverted, at=4)  # the other edition's: not in this report
    stored.close()
    students = [_row("ana", []), _row("ben", ["mask-inverted"])]
    figures = report._while_working(tmp_path, "sdpa", students)
    assert figures["codes"] == {"mask-inverted": {"met": 2, "fixed": 1}}
    assert figures["checks_per_student"] == {"ana": 2, "ben": 1}
    data = report.Data("sdpa", [], students, [], {}, figures)
    for language, words in (("zh", ("做题时的检查", "2 名学生", "检查了 3 次")),
                            ("en", ("While working", "2 students", "3 times"))):
        with i18n.using(language):
            page = report._html(data)
        assert all(w in page for w in words), language
        assert "<td><code>mask-inverted</code></td><td class=n>2</td><td class=n>1</td>" in page
        assert f'src="{report.WHILE_WORKING_CHART}"' in page
    assert report._while_working(tmp_path / "elsewhere", "sdpa", students) is None  # no service: no section
    with i18n.using("en"):
        report._charts(data, str(tmp_path))
    assert (tmp_path / report.WHILE_WORKING_CHART).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
