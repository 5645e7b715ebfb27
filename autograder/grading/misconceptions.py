"""The registry of known mistakes, as the engine reads them from the course (``course/<part>.py``).

Codes are part of the product's interface (reports count them, tests key on
them): never rename one.  An entry says what the code means to a student
(`explanation`, `hint`), the graded part where the mistake lives (`home`:
the part that charges it), whether other parts that fail only because of it
keep their points when each mistake is charged once (`composite_credit`;
``composition.HOME``), which graded functions have an executable model of it
(`modelled_by`: the course functions whose `models` name it; empty when a
check observes it directly),
and the one-bug sample of the demo class that shows it (`sample`).
``tests/grading/test_misconception_registry.py`` holds every other use of a
code (mutants, checks, samples, docs) to this list.
"""
from dataclasses import dataclass

from course import FUNCTIONS, MISTAKES


@dataclass(frozen=True)
class Misconception:
    code: str
    explanation: str
    hint: str
    home: str  # the graded part (a test cell's part) where the mistake lives
    composite_credit: bool = False
    modelled_by: tuple = ()  # graded functions whose mutants reproduce it
    sample: str = ""  # the demo class's one-bug sample; "" means "bug-<code>"

    @property
    def sample_name(self) -> str:
        return self.sample or f"bug-{self.code}"


def _modelled_by(code: str) -> tuple:
    return tuple(sorted(f.name for f in FUNCTIONS.values() if code in f.models))


_CATALOGUE = [Misconception(code, m.explanation, m.hint, home=home, composite_credit=m.composite_credit,
                            modelled_by=_modelled_by(code), sample=m.sample)
              for code, (home, m) in MISTAKES.items()]

CATALOGUE = {m.code: m for m in _CATALOGUE}
# Where each misconception that a composite may pass on lives: the helper whose own part charges it.
COMPOSITE_HOME = {m.code: m.home for m in _CATALOGUE if m.composite_credit}
# Every code's home: where a device or dtype check that graded a known mistake's output has it charged.
HOMES = {m.code: m.home for m in _CATALOGUE}
