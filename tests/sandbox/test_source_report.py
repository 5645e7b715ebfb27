"""Every text compiled at run time reaches the grader, and the grader reads it with the notebook's scan.

The hook (``guest/source_report.py``) is installed in a child interpreter here, as in a runner: an audit
hook cannot be removed, so never in the test process.  The child writes its reports to a pipe this side
reads with the protocol's own reader.
"""
import ast
import os
import subprocess
import sys
import textwrap

import pytest

from autograder.grading import code_review
from autograder.sandbox import compiled_texts
from autograder.sandbox.compiled_texts import CompiledTexts
from autograder.sandbox.guest import GUEST_DIR, wire

CHILD = textwrap.dedent('''
    import os, sys
    sys.path.insert(0, {guest!r})
    import source_report
    out = os.fdopen({fd}, "wb")
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    source_report.install(out)
    {body}
''')


def _reports(body: str, tmp_path) -> tuple[list[tuple[str, bytes]], int]:
    """(kind, data) of each report the child sent while running `body`, and its exit status."""
    frames, status = _frames(body, tmp_path)
    return [(header["kind"], data) for header, data in frames], status


def _frames(body: str, tmp_path) -> tuple[list[tuple[dict, bytes]], int]:
    """(header, data) of each report the child sent while running `body`, and its exit status."""
    read, write = os.pipe()
    script = CHILD.format(guest=str(GUEST_DIR), fd=write, body=textwrap.dedent(body))
    proc = subprocess.Popen([sys.executable, "-c", script], pass_fds=(write,), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(write)
    reports = []
    with os.fdopen(read, "rb") as stream:
        while True:
            try:
                header, blobs = wire.receive(stream)
            except EOFError:
                break
            assert header["op"] == "compiled"
            reports.append((header, blobs[0]))
    status = proc.wait(timeout=120)
    assert status in (0, 70), proc.stderr.read().decode()[-2000:]
    return reports, status


SOURCES = ("source", "source-bytes")  # a str's text, or bytes (which a str also arrives as: the audit event's)


def _texts(reports):
    return [data.decode() for kind, data in reports if kind in SOURCES]


def test_text_run_by_any_route_is_reported_before_it_runs(tmp_path):
    reports, status = _reports('''
        exec("a = 1")
        eval("2 + 3")
        from sympy.parsing.sympy_parser import parse_expr
        parse_expr("7 * 6", transformations=())
        import timeit
        timeit.timeit("b = 4", number=1)
    ''', tmp_path)
    texts = _texts(reports)
    assert status == 0
    for expected in ("a = 1", "2 + 3", "b = 4"):
        assert any(expected in t for t in texts), (expected, texts)
    assert any("7" in t and "6" in t for t in texts)


def test_ipython_cells_compile_as_text_and_their_trees_are_not_reported(tmp_path):
    reports, status = _reports('''
        shell.run_cell("c = 5\\nc")
        shell.run_cell("%timeit -n 1 -r 1 c + 1")
        shell.run_cell("%time c + 2")
    ''', tmp_path)
    assert status == 0
    assert [kind for kind, _ in reports if kind not in SOURCES] == []
    assert any("c = 5" in t for t in _texts(reports))


def test_a_tree_compiled_outside_a_cell_and_a_planted_pyc_are_unreadable(tmp_path):
    (tmp_path / "helper.py").write_text("value = 1\n")
    reports, status = _reports('''
        import ast, codeop, marshal, importlib.util, sys
        codeop.Compile()(ast.parse("d = 6"), "<tree>", "exec")
        code = compile("value = 2", "helper.py", "exec")
        with open("planted.pyc", "wb") as fh:
            fh.write(importlib.util.MAGIC_NUMBER + b"\\0" * 12 + marshal.dumps(code))
        sys.path.insert(0, ".")
        import planted
    ''', tmp_path)
    assert status == 0
    opaque = [data for kind, data in reports if kind == "opaque"]
    assert b"syntax tree" in opaque
    assert any(data.startswith(b"compiled module") and b"planted.pyc" in data for data in opaque)


@pytest.mark.parametrize("blind", [
    "os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())",
    "r, w = os.pipe(); os.dup2(w, out.fileno())",
])
def test_a_blinded_report_ends_the_process_before_the_text_runs(tmp_path, blind):
    reports, status = _reports(f'''
        {blind}
        exec("open('ran', 'w').close()")
    ''', tmp_path)
    assert status == 70
    assert not (tmp_path / "ran").exists()


def test_the_cap_on_one_text_is_reported_as_cut(tmp_path):
    reports, _ = _reports(f'''
        exec("x = 0\\n" * {compiled_texts.MAX_TEXT_BYTES // 6 + 10})
    ''', tmp_path)
    assert any(kind == "cut" for kind, _ in reports)


def test_compiled_texts_keep_each_text_once_within_caps_and_count_what_they_drop(monkeypatch):
    texts = CompiledTexts()
    texts.request = ("cell", 3)
    texts.add("source", [b"x = 1"])
    texts.add("source", [b"x = 1"])
    assert list(texts.texts.values()) == ["x = 1"] and list(texts.where.values()) == [("cell", 3)]
    texts.add("source", [b"\xff\xfe not utf-8"])
    texts.add("cut", [b"..."])
    texts.add("forged-kind", [b"y = 2"])
    texts.add("source", [b"a", b"b"])
    assert texts.unreadable == 4 and texts.opaque
    monkeypatch.setattr(compiled_texts, "MAX_TEXTS", 1)
    texts.add("source", [b"z = 3"])
    assert texts.unreadable == 5 and "z = 3" not in texts.texts.values()


def _notes(texts, opaque=(), cells=("x = 1\n",)):
    compiled = CompiledTexts()
    for text in texts:
        compiled.add("source", [text.encode()])
    for what in opaque:
        compiled.add("opaque", [what.encode()])
    return code_review.runtime_notes(compiled, list(cells), lambda request: 7)


def test_a_text_the_notebook_does_not_show_holds_where_the_notebooks_own_code_would():
    hidden = "__import__('gc').get_objects()"
    notes = _notes([hidden])
    assert notes and all(n["holds"] and n["cell"] == 7 for n in notes)
    assert any("__import__" in n["detail"] for n in notes)


def test_cells_libraries_texts_and_plain_hidden_code_do_not_hold():
    cell = "for name_ in ('a',):\n    value_ = globals()[name_]\n"  # a provided cell, as the runner ran it
    dataclass = "def __create_fn__():\n def __repr__(self):\n  return self.__class__.__qualname__\n return __repr__"
    namedtuple = "lambda _cls, a, b: _tuple_new(_cls, (a, b))"
    assert _notes([cell, cell.strip() + "\n\n", dataclass, namedtuple, "1 + 1"], cells=[cell]) == []


@pytest.mark.parametrize("hidden, category", [
    ("from torch.distributions import Categorical\ndef sm(x):\n    return Categorical(logits=x).logits.exp()",
     "recording-unfollowed"),
    ("import torch\ndef sm(x):\n    return torch.softmax(x, -1)", "softmax-builtin"),
    ("import torch.nn.functional as F\nattend = F.scaled_dot_product_attention", "sdpa-builtin")])
def test_a_built_in_in_code_compiled_at_run_time_holds(hidden, category):
    """A red-team `hubconf.py`, written by a cell and imported by `torch.hub`, returned `Categorical`'s softmax
    (no tripwire behind it): 105/105.  A built-in in a text the notebook does not show holds, whatever the
    tripwires would see (a fuser can run a family's kernel past them)."""
    notes = _notes([hidden])
    assert [n["category"] for n in notes] == [category] and notes[0]["holds"], notes


def test_unreadable_loads_hold_and_a_long_library_text_lists_a_few_lines():
    assert [n["category"] for n in _notes([], opaque=["syntax tree"])] == ["dynamic-code"]
    many = "\n".join(f"exec('x{i} = 1')" for i in range(50))
    assert len(_notes([many])) == code_review.MAX_NOTES_PER_TEXT


def test_notes_read_the_same_whatever_order_the_runners_threads_reported_in():
    """Two gradings of one notebook must give the same feedback: a thread's report may arrive before or after
    the main thread's (attack-odd-process-names: a thread's dlsym raced the runner's fork)."""
    reports = [("opaque", b"started a process: os.fork"), ("opaque", b"native code: ctypes.dlsym"),
               ("source", b"import torch.distributions"), ("opaque", b"native code: ctypes.dlopen")]
    readings = []
    for order in (reports, reports[::-1], reports[1:] + reports[:1]):
        compiled = CompiledTexts()
        for kind, data in order:
            compiled.add(kind, [data])
        readings.append(code_review.runtime_notes(compiled, [], lambda request: 3))
    assert len(readings[0]) == 4 and readings[1] == readings[0] and readings[2] == readings[0], readings


def test_what_a_timing_magic_compiles_is_the_cells_own_code(tmp_path):
    """`%timeit`, `%time`, `%prun` and `%%capture` compile the Python of their line or body at run time; the scan
    read it in the cell, so a built-in timed in a scratch cell holds nothing (red team: every point held)."""
    cells = ["import torch\nt = torch.randn(4, 4)", "%timeit -n 1 -r 1 torch.softmax(t, -1)",
             "%time ref = torch.softmax(t, -1)", "%%timeit -n 1 -r 1 u = t * 2\ntorch.softmax(u, -1)",
             "%%capture cap\nref2 = torch.softmax(t, -1)\n%time ref3 = torch.softmax(t, 0)",
             "%prun -q torch.softmax(t, -1)"]
    frames, status = _frames("\n".join(f"shell.run_cell({cell!r})" for cell in cells), tmp_path)
    assert status == 0
    compiled = CompiledTexts()
    for header, data in frames:
        compiled.add(header["kind"], [data], header.get("filename"), header.get("sha256"))

    # `%time` joins its words again by single spaces; the scan reads what it runs (red team: a comment or a double
    # space after the built-in held every point)
    spaced = ["import torch\nt = torch.randn(4, 4)", "%time ref = torch.softmax(t,  dim=-1)  # the built-in"]
    spaced_frames, status = _frames("\n".join(f"shell.run_cell({cell!r})" for cell in spaced), tmp_path)
    for header, data in spaced_frames:
        compiled.add(header["kind"], [data], header.get("filename"), header.get("sha256"))
    cells = cells + spaced[1:]

    def softmax_notes(sources):  # (importing torch here, as a runner does before any cell, adds notes of its own)
        return [n for n in code_review.runtime_notes(compiled, sources, lambda request: 0) if "softmax" in n["detail"]]

    assert softmax_notes(cells) == []
    # the same texts, where the notebook shows no magic that compiles them, hold as before
    notes = softmax_notes(cells[:1])
    assert notes and {n["category"] for n in notes} == {"softmax-builtin"} and all(n["holds"] for n in notes), notes


def test_a_timing_magic_inside_an_expression_is_read_at_run_time(tmp_path):
    """The scan splices in a magic that is a statement of its own; `y = %time …` it does not, so what that compiles
    at run time is read as hidden code (red team: a gc walk to the runner under `_ = %time …` held nothing)."""
    cells = ["import torch\nt = torch.randn(4, 4)", "y = %time torch.softmax(t, -1)"]
    frames, status = _frames("\n".join(f"shell.run_cell({cell!r})" for cell in cells), tmp_path)
    assert status == 0
    compiled = CompiledTexts()
    for header, data in frames:
        compiled.add(header["kind"], [data], header.get("filename"), header.get("sha256"))
    notes = [n for n in code_review.runtime_notes(compiled, cells, lambda request: 0) if "softmax" in n["detail"]]
    assert notes and all(n["holds"] for n in notes), notes


def test_the_trusted_side_reads_a_bounded_amount_of_run_time_code_and_holds_the_rest(monkeypatch):
    """Found by a red-team pass: 60 distinct texts of 250 KB, compiled by a 116 KB notebook, held the check
    service's one grader for 370 s of trusted-side scanning.  Past `MAX_SCANNED_BYTES` one note holds, unread;
    the texts the notebook shows as cells are not counted."""
    monkeypatch.setattr(code_review, "MAX_SCANNED_BYTES", 2**20 // 16)  # the same rule, a sixteenth of the reading
    scanned = []
    real_scan = code_review._scan_text.__wrapped__
    monkeypatch.setattr(code_review, "_scan_text", lambda text: scanned.append(len(text)) or real_scan(text))
    plain = [f"value_{n} = {n}\n" + "x = 1\n" * 2_500 for n in range(5)]  # 5 texts of 15 KB
    cell = "y = 2\n" * 2_500  # the notebook's own cell: read already, not counted again
    notes = _notes([cell, *plain], cells=[cell])
    assert len(scanned) == 4 and sum(scanned) <= code_review.MAX_SCANNED_BYTES  # the fifth is not read
    assert [n["category"] for n in notes] == ["dynamic-code"] and notes[0]["holds"], notes
    assert "MiB" in notes[0]["detail"], notes
    assert _notes(plain[:3]) == []  # within the bound: read, and plain code holds nothing


def test_opening_a_processs_memory_map_or_memory_is_unreadable_however_the_path_is_spelled(tmp_path):
    reports, status = _reports('''
        import os, pathlib
        open("/".join(["", "proc", "self", "ma" + "ps"])).close()
        os.symlink("/proc/self/mem", "m")
        os.close(os.open("m", os.O_RDONLY))
        open(pathlib.Path("plain.txt"), "w").close()
        open(str(os.getpid()).join(["/proc/", "/status"])).close()
    ''', tmp_path)
    opaque = [data.decode() for kind, data in reports if kind == "opaque"]
    assert status == 0
    assert any(o.startswith("opened /proc/") and o.endswith("/maps") for o in opaque), opaque
    assert any(o.startswith("opened /proc/") and o.endswith("/mem") for o in opaque), opaque
    assert len(opaque) == 2, opaque


def test_a_path_object_is_judged_by_the_path_it_opens(tmp_path):
    reports, _ = _reports('''
        class Sneaky:
            def __fspath__(self):
                return "/proc/self/maps"
        open(Sneaky()).close()
    ''', tmp_path)
    assert [data[:12] for kind, data in reports if kind == "opaque"] == [b"opened /proc"]


def test_a_memory_file_opened_relative_to_a_directory_descriptor_is_unreadable(tmp_path):
    reports, _ = _reports('''
        import os
        where = os.open("/proc/self", os.O_RDONLY)
        os.close(os.open("maps", os.O_RDONLY, dir_fd=where))
    ''', tmp_path)
    assert [data.startswith(b"opened ") and data.endswith(b"/maps") for kind, data in reports
            if kind == "opaque"] == [True], reports


def test_a_long_text_is_sent_by_digest_and_passes_only_as_the_installed_file_it_names(tmp_path):
    import torch.nn.functional as F

    assert os.path.getsize(F.__file__) > compiled_texts.MAX_TEXT_BYTES
    frames, _ = _frames(f'''
        import ast
        import torch, torch.nn.functional as F
        # IPython's display of a traceback through functional.py parses that file (a long text), with stack_data.
        import stack_data
        stack_data.Source.for_filename(F.__file__)
        source = open({F.__file__!r}).read()
        ast.parse(source + "\\nx = 1", {F.__file__!r})  # the same file name, another text, not from a display
    ''', tmp_path)
    compiled = CompiledTexts()
    for header, data in frames:
        compiled.add(header["kind"], [data], header.get("filename"), header.get("sha256"))
    assert len(compiled.long) == 1 and compiled.long[0][0] == F.__file__  # the display's parse
    opaque = [what for what, _ in compiled.opaque  # importing torch here (a runner has it imported already)
              if not what.startswith(("opened /proc/", "native code, raw memory"))]
    assert [what.startswith("compiled again ") and what.endswith("functional.py") for what in opaque] == [True], \
        opaque  # the other text
    notes = code_review.runtime_notes(compiled, [], lambda request: 0)
    assert len([n for n in notes if "functional.py" in n["detail"]]) == 1, notes


def test_an_installed_module_compiled_again_is_unreadable_however_its_code_is_loaded(tmp_path):
    """A second load of an imported module's code gives back the functions the tripwires replaced: its
    source compiled under its own name, its .pyc through the import system's loader, or bytes that are not
    that .pyc passed off as it (a caller chooses the path `_compile_bytecode` is given)."""
    reports, status = _reports('''
        import importlib.util, json, marshal
        from importlib._bootstrap_external import _compile_bytecode
        path = json.__file__
        compile(open(path).read(), path, "exec")
        cached = importlib.util.cache_from_source(path)
        _compile_bytecode(open(cached, "rb").read()[16:], "json", cached)
        _compile_bytecode(marshal.dumps(compile("x = 1", "<hidden>", "exec")), "json", cached)
    ''', tmp_path)
    opaque = [data.decode() for kind, data in reports if kind == "opaque"]
    assert status == 0
    assert any(text.startswith("compiled again ") and text.endswith("json/__init__.py") for text in opaque), opaque
    assert any(text.startswith("compiled module again ") for text in opaque), opaque
    assert any(text.startswith("compiled module ") and "again" not in text for text in opaque), opaque


def test_a_first_import_and_a_traceback_display_are_not_reported(tmp_path):
    """A module imported for the first time after the hook (from its .pyc, or from source), and IPython's
    display of a traceback through installed files, which parses them again."""
    reports, status = _reports('''
        import sys
        sys.dont_write_bytecode = True
        import csv, wave  # not imported before
        shell.run_cell("import json\\njson.loads('{')")
    ''', tmp_path)
    opaque = [data.decode() for kind, data in reports if kind == "opaque"]
    assert status == 0 and opaque == []


def test_a_long_text_under_a_tripwire_name_is_matched_with_its_module_file_before_its_package(monkeypatch):
    """A traceback through a function the tripwires gave a new body shows its module's source under the
    body's file name: that module's file is read first (hashing all of torch took most of a second)."""
    import hashlib

    import torch.nn.functional as F

    with open(F.__file__, "rb") as fh:
        functional = hashlib.sha256(fh.read()).hexdigest()
    name = os.path.join(str(GUEST_DIR), code_review.TRIPWIRE_PREFIX + "torch.nn.functional.softmax")
    package_walks = []
    real_walk = code_review._package_digests.__wrapped__
    monkeypatch.setattr(code_review, "_package_digests", lambda package: package_walks.append(package)
                        or real_walk(package))
    compiled = CompiledTexts()
    compiled.add("cut", [b"..."], name, functional)
    assert code_review.runtime_notes(compiled, [], lambda request: 0) == [] and package_walks == []
    # Another file of the package under that name is still the library's (read by the walk); no file is not.
    with open(os.path.join(os.path.dirname(F.__file__), "modules", "module.py"), "rb") as fh:
        other = hashlib.sha256(fh.read()).hexdigest()
    compiled = CompiledTexts()
    compiled.add("cut", [b"..."], name, other)
    compiled.add("cut", [b"..."], name, "0" * 64)
    notes = code_review.runtime_notes(compiled, [], lambda request: 0)
    assert package_walks == ["torch"] and len(notes) == 1


def test_a_tripwire_name_under_a_package_the_tripwires_never_touch_is_the_runners(monkeypatch):
    """Found by a red-team pass: 4,096 one-line texts named `tripwire-<package>.x<i>` after 19 installed packages
    made the grader walk and hash every file of one package per text (its cache keeps 8): 168 s of one check.
    Only the tripwires' own packages are theirs; any other such name is read as the runner's text."""
    import ast as ast_module

    tripwires = (GUEST_DIR / "tripwires.py").read_text()
    (libraries,) = [node.value for node in ast_module.walk(ast_module.parse(tripwires))
                    if isinstance(node, ast_module.Assign) and getattr(node.targets[0], "id", "") == "LIBRARIES"]
    assert ast_module.literal_eval(libraries) == code_review.TRIPWIRE_LIBRARIES
    package_walks = []
    monkeypatch.setattr(code_review, "_package_digests", lambda package: package_walks.append(package) or frozenset())
    compiled = CompiledTexts()
    for n, package in enumerate(("sympy", "numpy", "pip", "IPython") * 3):
        compiled.add("source", [f"__import__('gc').get_objects()  # {n}".encode()],
                     os.path.join(str(GUEST_DIR), f"{code_review.TRIPWIRE_PREFIX}{package}.x{n}"))
    notes = code_review.runtime_notes(compiled, [], lambda request: 0)
    assert package_walks == [] and notes and all(note["holds"] for note in notes)


def test_a_tripwire_name_of_many_parts_is_the_runners_and_costs_no_search(monkeypatch):
    """Found by a red-team pass: `tripwire-torch.a.a.…` with 2,000 parts made the grader join and look up 4,000
    paths per text (0.4 s each, 4,096 texts a check)."""
    import time

    name = os.path.join(str(GUEST_DIR), code_review.TRIPWIRE_PREFIX + "torch." + "a." * 1990 + "x")
    started = time.perf_counter()
    assert code_review._tripwire_name(name) is None and not code_review._library_source(name, "x = 1")
    assert time.perf_counter() - started < 0.1
    real = os.path.join(str(GUEST_DIR), code_review.TRIPWIRE_PREFIX + "torch.nn.functional.softmax")
    assert code_review._tripwire_name(real) == "torch.nn.functional.softmax"


def test_a_text_is_read_in_the_encoding_python_compiled_it_in(tmp_path):
    """Found by a red-team pass: bytes with `# coding: utf-7` were read as UTF-8, a line the scan could not
    parse (so it read nothing), while the runner compiled hidden code from them.  The audit event hands a str's
    text over as UTF-8 bytes too, and Python reads a str's characters whatever cookie they spell: bytes whose
    cookie reads them otherwise than UTF-8 are read both ways."""
    frames, status = _frames('''
        import sys
        sys.path.insert(0, ".")
        hidden = b"# coding: utf-7\\npass+AAo-import gc+AAo-objects = gc.get_objects()+AAo-"
        open("helper_" + "mod.py", "wb").write(hidden)
        import helper_mod
        compile("# coding: utf-7\\nkept = '+AAo-'\\n", "<string>", "exec")
    ''', tmp_path)
    assert status == 0
    compiled = CompiledTexts()
    for header, data in frames:
        compiled.add(header["kind"], [data], header.get("filename"), header.get("sha256"))
    read = [code_review.readings(text) for text in compiled.texts.values()]
    module = [r for r in read if any(b"utf-7\npass+AAo-import gc" in t for t in r if isinstance(t, bytes))]
    assert len(module) == 1 and len(module[0]) == 2, read  # its UTF-8 reading, and its bytes (read as UTF-7)
    assert ast.dump(ast.parse(module[0][1])) == ast.dump(ast.parse("pass\nimport gc\nobjects = gc.get_objects()"))
    assert any(r[0] == "# coding: utf-7\nkept = '+AAo-'\n" for r in read), read
    notes = code_review.runtime_notes(compiled, [], lambda request: 0)
    assert any("gc.get_objects" in n["detail"] and n["holds"] for n in notes), notes


@pytest.mark.parametrize("data", [
    b"# coding: utf-7\npass+AAo-import gc+AAo-gc.get_objects()+AAo-",  # the cookie on line 1
    b"\r# coding: utf-7\npass+AAo-import gc+AAo-gc.get_objects()+AAo-",  # behind a bare carriage return (red team)
    b"\r\n# -*- coding: utf-7 -*-\npass+AAo-import gc+AAo-gc.get_objects()+AAo-",
    b"#\r# vim: set fileencoding=utf-7 :\npass+AAo-import gc+AAo-gc.get_objects()+AAo-",
    "import gc\ngc.get_objects()\n".encode("utf-16"),  # a BOM Python does not take: not compiled, so not read
    b"\xef\xbb\xbfimport gc\ngc.get_objects()\n",  # UTF-8's BOM
    b"# coding: latin-1\nname = '\xe9'\nimport gc\ngc.get_objects()\n",
])
def test_bytes_are_read_as_python_reads_them_however_the_cookie_is_placed(data):
    """Whatever bytes the runner compiled, one of the grader's readings is what CPython compiled from them."""
    try:
        compiled_by_python = ast.dump(ast.parse(data))
    except (SyntaxError, ValueError):
        return  # Python compiles nothing from them: nothing ran
    read = []
    for text in code_review.readings(data):
        try:
            read.append(ast.dump(ast.parse(text)))
        except SyntaxError:
            pass  # a reading that does not parse holds (`test_static_scan`); here: one of them is Python's
    assert compiled_by_python in read
    compiled = CompiledTexts()
    compiled.add("source-bytes", [data])
    assert any("gc.get_objects" in n["detail"] for n in code_review.runtime_notes(compiled, [], lambda r: 0))


def test_code_built_at_run_time_is_unreadable_and_a_forged_ipython_frame_passes_for_nothing(tmp_path):
    """Found by a red-team pass: a lambda's code with its names replaced (`code.replace(co_names=...)`) made
    into a function ran names no text showed; and generator code renamed like IPython's `run_ast_nodes`, in a
    file named like IPython's, passed a rewritten syntax tree off as IPython's own.  Code objects and functions
    built from the student's own code are unreadable, and IPython's frames are known by their code objects."""
    reports, status = _reports('''
        import ast, types
        from IPython.core.compilerop import CachingCompiler
        f = lambda x: x.Q
        g = types.FunctionType(f.__code__.replace(co_names=("T",)), {})
        def frames(compiler, tree):
            yield compiler(tree, "<cell>", "exec")
        fake = frames.__code__.replace(co_name="run_ast_nodes", co_filename="/x/IPython/core/interactiveshell.py")
        next(types.FunctionType(fake, {})(CachingCompiler(), ast.parse("y = 1")))
    ''', tmp_path)
    assert status == 0
    opaque = [data for kind, data in reports if kind == "opaque"]
    assert opaque.count(b"a code object or function built at run time") == 4, opaque  # 2 replace, 2 functions
    assert b"syntax tree" in opaque, opaque


# Routes by which a library builds a code object or a function for the student, calling what it was handed:
# `copy`'s reconstruction was found by a red-team pass (105/105, no note); the rest are its class.
LIBRARY_BUILDERS = {
    "copy-reduce": '''
        import copy, functools
        class Rebuilt:
            def __reduce_ex__(self, protocol):
                return functools.partial(CODE.replace, co_names=("T",)), ()
        built = copy.copy(Rebuilt())''',
    "exit-stack": '''
        import contextlib
        with contextlib.ExitStack() as stack:
            stack.callback(CODE.replace, co_names=("T",))''',
    "weakref-finalize": '''
        import weakref
        class Anything:
            pass
        thing = Anything()
        weakref.finalize(thing, CODE.replace, co_names=("T",))
        del thing''',
    "thread": '''
        import threading
        worker = threading.Thread(target=CODE.replace, kwargs={"co_names": ("T",)})
        worker.start(); worker.join()''',
    "executor": '''
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(1) as pool:
            pool.submit(CODE.replace, co_names=("T",)).result()''',
    "map": '''
        list(map(lambda names: CODE.replace(co_names=names), [("T",)]))''',
    "function-type-by-library": '''
        import functools
        functools.reduce(lambda made, code: type(lambda: 0)(code, {}), [CODE], None)''',
    "code-assigned": '''
        import contextlib
        def plain(x):
            return x
        with contextlib.ExitStack() as stack:
            stack.callback(setattr, plain, "__code__", CODE)''',
}


@pytest.mark.parametrize("route", LIBRARY_BUILDERS)
def test_code_built_for_the_student_by_a_library_is_unreadable(tmp_path, route):
    """Whoever calls the constructor, a code object or function built while the student's code can run is
    unreadable: a library frame that calls what it is handed builds it for them (red team: `copy.copy` of an
    object whose `__reduce_ex__` returned `code.replace`)."""
    reports, status = _reports("CODE = (lambda x: x.Q).__code__\n" + textwrap.dedent(LIBRARY_BUILDERS[route]),
                               tmp_path)
    assert status == 0
    assert b"a code object or function built at run time" in [data for kind, data in reports if kind == "opaque"]


def test_a_generator_decorated_by_types_coroutine_is_not_built_code(tmp_path):
    """`types.coroutine` sets a flag on the generator's own code (asyncio decorates with it when imported): the
    one library builder known by its code object.  The same flag set by the student's own `replace` is built."""
    reports, status = _reports('''
        import types
        @types.coroutine
        def waits():
            yield
    ''', tmp_path)
    assert status == 0 and [data for kind, data in reports if kind == "opaque"] == []
    reports, _ = _reports("def waits():\n    yield\nwaits.__code__ = waits.__code__.replace(co_flags=0x100 | 0x20)\n",
                          tmp_path)
    assert b"a code object or function built at run time" in [data for kind, data in reports if kind == "opaque"]


def test_a_process_started_is_unreadable_ipythons_command_lines_included(tmp_path):
    """Red team: `torch.os.popen` started a fresh interpreter, with no tripwires and no hook, whose output of
    `F.softmax` came back through files (105/105); so did `!ls` with a PATH edit and `%cat /dev/null; sh …`.
    Any process started while the student's code can run is unreadable, IPython's shell included."""
    reports, status = _reports('''
        import os, subprocess
        subprocess.run(["true"])
        os.system("true")
    ''', tmp_path)
    opaque = [data for kind, data in reports if kind == "opaque"]
    assert status == 0 and {b"started a process: subprocess.Popen", b"started a process: os.system"} <= set(opaque)
    for line in ('shell.system("true")', 'shell.getoutput("true")', 'shell.run_line_magic("cat", "/dev/null")'):
        reports, status = _reports(line + "\n", tmp_path)
        opaque = [data for kind, data in reports if kind == "opaque"]
        assert status == 0 and any(data.startswith(b"started a process: ") for data in opaque), (line, opaque)


def test_native_code_raw_memory_and_unpickled_globals_are_unreadable(tmp_path):
    """Red team: a pickle, unpickled by a library under another name (`jupyter_client`'s `pickle_unpacker`), built
    ctypes calls into torch's own CPU softmax kernel, past every dispatcher tripwire (105/105).  Loading a
    library's symbols, reading raw memory and every global an unpickler looks up are unreadable."""
    reports, status = _reports('''
        import ctypes, io, pickle
        from jupyter_client.session import pickle_unpacker
        pickle_unpacker(pickle.dumps(io.BytesIO))
        ctypes.CDLL(None).getpid
        ctypes.string_at(ctypes.addressof(ctypes.create_string_buffer(b"x")), 1)
    ''', tmp_path)
    opaque = {data.rsplit(b": ", 1)[-1] for kind, data in reports if kind == "opaque"}
    assert status == 0 and {b"pickle.find_class", b"ctypes.dlopen", b"ctypes.dlsym", b"ctypes.string_at"} <= opaque


def test_native_code_from_a_file_outside_the_installation_and_subinterpreters_are_unreadable(tmp_path):
    """Red team: a C++ module written to /tmp and loaded as an extension called `at::cpu::_softmax`, which no
    tripwire sees; a subinterpreter ran ctypes where this process's audit hook does not watch; cffi's backend
    loads and calls any library as ctypes does.  An extension module of the installation loads unreported."""
    import _json  # an extension module of the installation, copied where a student could write one

    copied = tmp_path / os.path.basename(_json.__file__)
    copied.write_bytes(open(_json.__file__, "rb").read())
    reports, status = _reports(f'''
        import importlib.machinery, importlib.util
        import _decimal  # from the installation: nothing to report
        loader = importlib.machinery.ExtensionFileLoader("_json", {str(copied)!r})
        importlib.util.module_from_spec(importlib.util.spec_from_file_location("_json", {str(copied)!r}, loader=loader))
        import _xxsubinterpreters
        _xxsubinterpreters.destroy(_xxsubinterpreters.create())
        import _cffi_backend
    ''', tmp_path)
    opaque = [data for kind, data in reports if kind == "opaque"]
    assert status == 0
    assert [data for data in opaque if data.startswith(b"native code loaded from ")] == [
        b"native code loaded from " + str(copied).encode()[-160:]], opaque
    assert b"started a subinterpreter" in opaque and b"imported _xxsubinterpreters" in opaque, opaque
    assert b"imported _cffi_backend" in opaque, opaque


def test_a_native_load_must_name_the_installations_file_plainly_and_no_hook_can_be_added(tmp_path):
    """Red team: an extension's origin given as a str subclass loaded unreported; a second audit hook, run after
    the runner's, re-pointed a link between the runner's check and the load.  A link or an object as the path is
    unreadable, and no hook can be added."""
    import _json

    link = tmp_path / "link.so"
    link.symlink_to(_json.__file__)  # into the installation: what the runner's check would have resolved
    reports, status = _reports(f'''
        import importlib.machinery, sys, types

        class Where(str):
            pass

        for origin in (Where({_json.__file__!r}), {str(link)!r}):
            loader = importlib.machinery.ExtensionFileLoader("_json", origin)
            loader.create_module(types.SimpleNamespace(name="_json", origin=origin))
        heard = []
        sys.addaudithook(lambda event, args: heard.append(event))  # refused: CPython drops it silently
        sys.audit("a.test.event")
        assert heard == [], heard
    ''', tmp_path)
    opaque = [data for kind, data in reports if kind == "opaque"]
    assert status == 0, reports
    assert b"native code loaded from a path given as an object" in opaque, opaque
    assert b"native code loaded from " + str(link).encode()[-160:] in opaque, opaque
    assert b"added an audit hook" in opaque, opaque


def test_a_relative_name_opened_through_a_directory_descriptor_must_not_follow_a_link(tmp_path):
    """Red team: links named "a" and "b" in a temporary directory, opened relative to its descriptor (which the
    `open` event does not carry), read /proc/self/maps and wrote /proc/self/mem unreported."""
    elsewhere = tmp_path / "elsewhere"  # not the child's working directory, against which the hook resolves
    elsewhere.mkdir()
    reports, status = _reports(f'''
        import os
        os.symlink("/proc/self/" + "ma" + "ps", {str(elsewhere / "b")!r})
        folder = os.open({str(elsewhere)!r}, os.O_RDONLY)
        os.close(os.open("b", os.O_RDONLY, dir_fd=folder))
        os.close(os.open("plain", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=folder))
    ''', tmp_path)
    opaque = [data for kind, data in reports if kind == "opaque"]
    assert status == 0, reports
    assert opaque.count(b"opened a name relative to a directory descriptor, following links") == 1, opaque
