"""The tests' own layout: a test module imports helpers from ``tests/support``, never another test module or
conftest (fixtures reach tests through pytest, not through imports)."""
import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def _module_of(path: Path) -> str:
    """Dotted name of a file under tests/ (``tests/grading/test_x.py`` -> ``tests.grading.test_x``)."""
    return ".".join(("tests", *path.relative_to(TESTS).with_suffix("").parts))


def _is_test_module(dotted: str) -> bool:
    """A test module or conftest of this suite (bare names too: pytest can put a test's folder on sys.path)."""
    parts = dotted.split(".")
    if parts[0] != "tests" and len(parts) > 1:
        return False  # e.g. course.checks.test_shapes: the hidden checks, not this suite
    return parts[-1] == "conftest" or parts[-1].startswith("test_")


def forbidden_imports(source: str, module: str) -> list[str]:
    """The test modules and conftests that `source` (the module named `module`) imports."""
    package = module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from tests import test_browser` and `from . import conftest` name the module in the alias
            targets = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [t for t in targets if _is_test_module(t)]
    return found


@pytest.mark.parametrize("source, module, expected", [
    ("from tests import test_browser as lab_ui", "tests.test_hub_browser", ["tests.test_browser"]),
    ("from .conftest import FAST_LIMITS", "tests.test_pipeline", ["tests.conftest"]),
    ("from .test_checks_local import PARTS", "tests.grading.test_evidence", ["tests.grading.test_checks_local"]),
    ("from .. import conftest", "tests.grading.test_x", ["tests.conftest"]),
    ("import tests.batch.test_cli", "tests.test_x", ["tests.batch.test_cli"]),
    ("def f():\n    from conftest import grading_report", "tests.test_x", ["conftest"]),
    ("from tests.support import browser as lab_ui", "tests.test_hub_browser", []),
    ("from course.checks import test_shapes as shapes", "tests.grading.test_x", []),
    ("import pytest\nfrom . import support", "tests.test_x", []),
])
def test_the_checker_sees_imports_of_test_modules(source, module, expected):
    assert forbidden_imports(source, module) == expected


def test_no_test_module_imports_another_test_module_or_conftest():
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        found = forbidden_imports(path.read_text(encoding="utf-8"), _module_of(path))
        if found:
            offenders[str(path.relative_to(TESTS.parent))] = found
    assert not offenders, f"move shared helpers to tests/support/ and import them from there: {offenders}"
