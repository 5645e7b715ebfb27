"""What the trusted process concludes from reading the student's code (``static_scan.py``).

Two consequences, both decided here and never by the student's process:

- a part whose graded functions reach a built-in softmax or attention loses
  its points, with ``[softmax-builtin]`` / ``[sdpa-builtin]``, even when the
  run-time tripwire inside the runner was lifted;
- code the grader cannot read to the end (gc walks, frames, ``sys.modules``
  edits or computed keys, ctypes, prlimit, other pids, names built at run
  time, attributes behind ``sys.stdout``) *holds* the notebook's points: each
  part shows what its checks gave, nothing counts until a person has read the
  flagged lines and decided in formgrader (`held_parts`).  What such code does
  may change every later call, so one finding holds every part, not only the
  function it sits in.  Other flags (a constant import, compiling one's own
  code) are listed for a person and cost nothing.

It also tells the runner which cells are the course's and which of those
demonstrate a built-in (`cell_roles`): only their own code may call one.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import course

from ..i18n import _
from ..notebook.cells import grade_id, is_answer_cell
from ..sandbox import guest
from . import scan_ast, static_scan
from .hidden_checks import CheckResult

if TYPE_CHECKING:
    from ..sandbox.compiled_texts import CompiledTexts
    from .hidden_checks import PartResult

# {part: the student functions its hidden checks call} (the course's declarations).
PART_FUNCTIONS = course.PART_FUNCTIONS
MAX_NOTES_PER_TEXT = 3  # flagged lines listed for one text compiled at run time
MAX_MAGIC_TEXTS = 256  # Python texts of one cell's `%time`-like magics taken as shown (nested magics included)
# Text compiled at run time that the trusted process reads, in all, per submission: the scan takes about 10 s
# a MiB, outside the sandbox's time limits (a red-team notebook compiled 60 texts of 250 KB and held the check
# service's grader for 6 minutes).  What an honest notebook compiles beyond its own cells is a few lines; past
# this, one holding note says the rest was not read.
MAX_SCANNED_BYTES = 2**20
GRADED_FUNCTIONS = sorted({f for functions in PART_FUNCTIONS.values() for f in functions})


def cell_roles(nb, positions: Sequence[int], sources: Sequence[str]) -> tuple[set[int], set[int]]:
    """(provided, demonstrating): positions of the cells the course supplies (a grade_id, not an answer),
    and of those among them that use a built-in softmax or attention themselves.

    Every other cell is the student's.  The runner lets a built-in through only for a demonstrating
    cell's own code; the student's cells never qualify, whatever they contain.
    """
    provided = [pos for pos, index in enumerate(positions)
                if grade_id(nb.cells[index]) and not is_answer_cell(nb.cells[index])]
    return set(provided), {provided[k] for k in _demonstrating(tuple(sources[pos] for pos in provided))}


@functools.lru_cache(maxsize=8)
def _demonstrating(provided: tuple[str, ...]) -> frozenset[int]:
    """Indices of the cells (read in order, so the first cell's imports count) that use a built-in."""
    scan = static_scan.scan(list(provided), ())
    return frozenset(f.cell for f in scan.findings if f.kind == "forbidden")


def review(sources: Iterable[str]) -> static_scan.ScanResult:
    """Scan the student's code cells (answers and added cells, in notebook order)."""
    return static_scan.scan(list(sources), GRADED_FUNCTIONS)


def charge_forbidden(results: dict[str, PartResult], forbidden: dict[str, list[static_scan.Finding]],
                     cell_numbers: Sequence[int]) -> None:
    """Fail every check of a part whose functions statically reach a forbidden API (`forbidden`: the scan's
    findings reachable from each graded function).

    `cell_numbers` maps the scan's cell indices to notebook cell indices (for
    the message).  Checks that already failed keep their message and get the
    code added.
    """
    for part, result in results.items():
        findings = [f for fn in PART_FUNCTIONS.get(part, ()) for f in forbidden.get(fn, [])]
        if not findings:
            continue
        codes = list(dict.fromkeys(f.code for f in findings))
        where = _("；").join(dict.fromkeys(_where(f, cell_numbers) for f in findings))
        message = _("评分时禁止使用内置 softmax/注意力，你的代码里有：{where}。请自己实现这一步。").format(where=where)
        result.checks = [_charged(check, codes, message) for check in result.checks]


def _charged(check, codes, message):
    if not check.passed:
        check.codes = list(dict.fromkeys(check.codes + codes))
        return check
    return CheckResult(name=check.name, title=check.title, part=check.part, max_points=check.max_points,
                       points=0.0, passed=False, message=message, codes=codes)


def _where(finding, cell_numbers):
    cell = cell_numbers[finding.cell] if finding.cell < len(cell_numbers) else finding.cell
    inside = _("（{binding} 中）").format(binding=finding.binding) if finding.binding else ""
    return _("第 {cell} 个单元格第 {line} 行 {detail}{inside}").format(cell=cell + 1, line=finding.line,
                                                                  detail=finding.detail, inside=inside)


def review_notes(scan: static_scan.ScanResult, cell_numbers: Sequence[int]) -> list[dict]:
    """The review findings as JSON-able dicts for grading.json, feedback and the class report; "holds":
    whether the finding holds the notebook's points (`held_parts`)."""
    holding = {id(f) for f in scan.held}
    return [{"cell": cell_numbers[f.cell] if f.cell < len(cell_numbers) else f.cell, "line": f.line,
             "category": f.code, "detail": f.detail, "holds": id(f) in holding} for f in scan.review]


def runtime_notes(compiled: "CompiledTexts", sources: Sequence[str], cell_of: Callable[[tuple], int]) -> list[dict]:
    """Review notes, all holding, for what the student's runners compiled at run time (``compiled``, from
    ``guest/source_report.py``) that the notebook does not show as code: each such text is read with the
    same scan, and holds where the notebook's own code would; what could not be read holds too.

    `sources` are the code cells the runner was given (every text that is one of them, as written or as
    IPython runs it, was read already); `cell_of` maps a text's request (("cell", position) or ("call", function)) to
    the notebook cell the note points to."""
    shown = {text.strip() for source in sources for text in (source, _as_ipython_runs(source), *_magic_texts(source))}
    notes = []
    budget = MAX_SCANNED_BYTES
    for digest, arrived in compiled.texts.items():
        if _library_source(compiled.filenames.get(digest), arrived):
            continue
        text = _utf8(arrived)
        if text is not None and text.strip() in shown and (isinstance(arrived, str) or _same_tree(arrived, text)):
            continue  # a cell, read already as the notebook's own code
        where = cell_of(compiled.where.get(digest, ()))
        budget -= len(arrived)
        if budget < 0:
            notes.append({"cell": where, "line": 0, "category": "dynamic-code", "holds": True,
                          "detail": _("运行时载入了评分程序读不到文本的代码：{what}").format(
                              what=_("运行时编译的代码超过 {limit} MiB，其余部分没有读").format(
                                  limit=MAX_SCANNED_BYTES // 2**20))})
            break
        for text in readings(arrived):
            if isinstance(text, str) and text.strip() in shown:
                continue
            scan = _scan_text(text)
            # and a built-in in it, which no graded function can be seen to reach from here: the tripwires
            # guard the families' kernels, but a fuser can run one past them, and a recording API has none
            # (red team: `Categorical` in a `hubconf.py` loaded by `torch.hub`)
            built_in = [f for f in scan.findings if f.kind == "forbidden"]
            for finding in [*scan.held, *built_in][:MAX_NOTES_PER_TEXT]:  # a library's whole source can arrive
                notes.append({"cell": where, "line": 0, "category": "recording-unfollowed"
                              if finding.code == static_scan.RECORDED else finding.code, "holds": True,
                              "detail": _("运行时才编译的代码（笔记本里看不到）第 {line} 行 {detail}").format(
                                  line=finding.line, detail=finding.detail)})
    for filename, digest, request in compiled.long:
        if not _library_digest(filename, digest):
            notes.append({"cell": cell_of(request), "line": 0, "category": "dynamic-code", "holds": True,
                          "detail": _("运行时载入了评分程序读不到文本的代码：{what}").format(
                              what=_("一段过长、又不是已安装文件内容的代码（{file}）").format(file=filename[:200]))})
    for what, request in compiled.opaque:
        notes.append({"cell": cell_of(request), "line": 0, "category": "dynamic-code", "holds": True,
                      "detail": _("运行时载入了评分程序读不到文本的代码：{what}").format(what=what)})
    # in a fixed order: reports arrive in whatever order the runner's threads sent them, and two gradings of one
    # notebook must read the same (attack-odd-process-names: a thread's dlsym raced the runner's fork)
    distinct = {(n["cell"], n["category"], n["detail"]): n for n in notes}
    return [distinct[key] for key in sorted(distinct)]


def readings(arrived: "str | bytes") -> list:
    """What Python may have compiled from a text compiled at run time.  A str: its characters.  Bytes (the audit
    event hands a str over as UTF-8 bytes too, and a str's coding cookie means nothing): their UTF-8 reading, and
    the bytes themselves, which the scan parses with CPython's own rules for a BOM, a cookie and line endings,
    where the two differ.  Reading the cookie here instead missed one behind a bare carriage return, and code
    hidden as UTF-7 scored full marks (red team)."""
    text = _utf8(arrived)
    if isinstance(arrived, str) or text is None:
        return [arrived]
    text = text.removeprefix("\ufeff")  # a str that starts with a BOM does not compile: as bytes, Python drops it
    return [text] if _same_tree(arrived, text) else [text, arrived]


def _utf8(arrived: "str | bytes") -> "str | None":
    if isinstance(arrived, str):
        return arrived
    try:
        return arrived.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def _same_tree(data: bytes, text: str) -> bool:
    try:
        return ast.dump(ast.parse(data)) == ast.dump(ast.parse(text))
    except Exception:  # noqa: BLE001 - MemoryError included: then both are read, and what cannot be parsed holds
        return False


# Where the Python installation and the guest files live (mounted read-only in the sandbox, at the same
# paths): a text that is the content of one of their files is that code, imported from source where it has no
# .pyc, or parsed by IPython to show a traceback through it.
_INSTALLATION = tuple(os.path.realpath(p) + os.sep
                      for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, str(guest.GUEST_DIR)})
MAX_LIBRARY_FILE_BYTES = 8 * 2**20
TRIPWIRE_PREFIX = "tripwire-"  # the file name tripwires.replace_body gives a new body: tripwire-<module>.<name>
# The packages whose functions the tripwires give new bodies (``guest/tripwires.py: LIBRARIES``): a name of
# theirs under any other package is the runner's, not theirs (a red-team notebook named 4,096 texts after 19
# packages, and each made the grader read and hash every file of one: 168 s).
TRIPWIRE_LIBRARIES = ("torch", "functorch")
MAX_TRIPWIRE_NAME_PARTS = 16  # module and qualified name: torch's deepest is under 10


def _library_source(filename: "str | None", text: "str | bytes") -> bool:
    """Whether `text` is the source of the installed file it names (read here, once per file), or for a
    function the tripwires gave a new body (a file name of theirs, no file), of a file of its package: the
    files its dotted name points to are read first, every file of the package only if none is it."""
    return bool(filename) and _library_digest(filename, _sha256(text))


def _library_digest(filename: str, digest: str) -> bool:
    """Whether `digest` is that of the installed file `filename` names (`_library_source`)."""
    dotted = _tripwire_name(filename)
    if dotted and any(digest in _library_digests(path) for path in _module_files(dotted)):
        return True
    return digest in _library_digests(filename)


def _tripwire_name(filename: str) -> "str | None":
    """The dotted name of a function the tripwires gave a new body, from the file name its code carries
    (``guest/tripwires.py``: `tripwire-<module>.<name>` in the guest directory); a traceback through it shows
    that module's source, which IPython parses."""
    head, name = os.path.split(filename)
    if os.path.realpath(head) != os.path.realpath(guest.GUEST_DIR) or not name.startswith(TRIPWIRE_PREFIX):
        return None
    dotted = name[len(TRIPWIRE_PREFIX):]
    parts = dotted.split(".")
    if len(parts) > MAX_TRIPWIRE_NAME_PARTS or parts[0] not in TRIPWIRE_LIBRARIES:  # each part is a path looked
        return None  # up, joined from all before it: 2,000 parts cost 0.4 s a text (red team)
    return dotted if all(part.isidentifier() for part in parts) else None


def _tripwire_package(filename: str) -> "str | None":
    """The top package of a function the tripwires gave a new body (`_tripwire_name`)."""
    dotted = _tripwire_name(filename)
    return dotted.split(".")[0] if dotted else None


@functools.lru_cache(maxsize=64)
def _package_roots(package: str) -> tuple:
    """The directories of an installed top-level package (found without importing anything)."""
    spec = importlib.util.find_spec(package)
    return tuple(spec.submodule_search_locations or ()) if spec else ()


def _module_files(dotted: str) -> list:
    """The installed files of the modules a dotted name may be in (``torch.nn.functional.softmax``:
    torch/nn/functional.py or its package's __init__.py, then torch/nn.py …), found by path alone."""
    parts = dotted.split(".")
    found = []
    for root in _package_roots(parts[0]):
        for end in range(len(parts) - 1, 0, -1):
            base = os.path.join(root, *parts[1:end])
            found += [p for p in (base + ".py", os.path.join(base, "__init__.py")) if end > 1 and os.path.isfile(p)]
        found.append(os.path.join(root, "__init__.py"))
    return found


@functools.lru_cache(maxsize=8)
def _package_digests(package: str) -> frozenset:
    """SHA-256 digests of every installed source file of `package` (read once per grading process)."""
    return frozenset(digest for root in _package_roots(package) for folder, _, files in os.walk(root)
                     for name in files if name.endswith(".py")
                     for digest in _library_digests(os.path.join(folder, name)))


def _sha256(text: "str | bytes") -> str:
    return hashlib.sha256(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")).hexdigest()


@functools.lru_cache(maxsize=8192)
def _library_digests(filename: str) -> frozenset:
    """SHA-256 digests of an installed file's content, as bytes and as the text Python reads (UTF-8); for a
    tripwire's file name, those of every file of its package."""
    package = _tripwire_package(filename)
    if package:
        return _package_digests(package)
    path = os.path.realpath(filename) if os.path.isabs(filename) else ""
    if not path.startswith(_INSTALLATION) or not path.endswith(".py"):
        return frozenset()
    try:
        if os.path.getsize(path) > MAX_LIBRARY_FILE_BYTES:
            return frozenset()
        with open(path, "rb") as fh:
            raw = fh.read()
        text = importlib.util.decode_source(raw)
        return frozenset({hashlib.sha256(raw).hexdigest(),
                          hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()})
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
        return frozenset()


@functools.lru_cache(maxsize=64)  # keyed by texts of up to 256 KB: 4,096 of them held a GiB
def _scan_text(text: "str | bytes") -> static_scan.ScanResult:
    return static_scan.scan([text], (), parse=_parse_python)


def _parse_python(text):
    return ast.parse(text)  # what cannot be parsed here holds (`static_scan.scan`): the runner may have run it


def _magic_texts(source: str) -> list[str]:
    """The Python texts the cell's `%time`-like magics hand to IPython to compile, as written and as IPython
    runs them: the scan read them in the cell (``scan_ast.PythonMagics``), so compiled at run time they are
    the notebook's own code (red team: `%timeit torch.softmax(t, -1)` in a scratch cell held every point)."""
    texts, pending = [], [source]
    while pending and len(texts) < MAX_MAGIC_TEXTS:
        runs = _as_ipython_runs(pending.pop())
        if "_magic(" not in runs:  # no magic: no second parse
            continue
        try:
            tree = ast.parse(runs)
        except (SyntaxError, ValueError, RecursionError):
            continue
        # only a magic that is a statement of its own, which the scan splices in (not `y = %time …`)
        for magic in (scan_ast.python_magic(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)):
            for text, _next_line in scan_ast.magic_python(*magic) if magic else ():
                texts += [text, _as_ipython_runs(text)]
                pending.append(text)
    return texts


@functools.lru_cache(maxsize=128)  # keyed by cells of up to 100,000 characters: 1,024 of them held a GiB
def _as_ipython_runs(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(source)
    except MemoryError:  # the reader's cap (``reading_process``)
        raise
    except Exception:  # noqa: BLE001 - IPython could not run it either
        return source


def held_parts(results: dict[str, PartResult], notes: Sequence[dict]) -> set[str]:
    """The parts whose points wait for a person: every part that earned any, while a note holds."""
    if not any(note["holds"] for note in notes):
        return set()
    return {part for part, result in results.items() if result.max_points > 0 and result.points > 0}
