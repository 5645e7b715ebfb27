"""Attacks on the grader: patched assertions, forged outputs, escapes, hangs, floods, tampered metadata.

Each sample's payload is what a hostile student would put in the notebook; `expect` says what grading
must still give (see `autograder.demo.submissions`).  ``GARBAGE`` (answers that earn nothing) is shared
with the evidence samples.
"""
import nbformat

from autograder.demo.submissions import Sample


def _tamper_points(nb):
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            meta["points"] = 1000


def _delete_test_cells(nb):
    nb["cells"] = [c for c in nb["cells"] if not (c.get("metadata", {}).get("nbgrader", {}).get("grade")
                                                 and c["cell_type"] == "code")]


def _blank_and_rename_tests(nb):
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell["cell_type"] == "code":
            cell["source"] = "pass"
            meta["grade_id"] = meta["grade_id"] + "-renamed"


def _fake_outputs(nb):
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                                "data": {"text/plain": str(meta.get("points", 1))}}]
        elif meta.get("solution") and cell["cell_type"] == "code":
            meta["solution"] = False
            meta["grade"] = True
            meta["points"] = 50


GARBAGE = {name: f"""
def {name}(*args, **kwargs):
    return torch.zeros(1)
""" for name in ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
                 "causal_mask", "key_padding_to_attn_mask", "fixed_attention")}
GARBAGE["hand-calc-answers"] = "hand_scores = hand_scaled = hand_weights = [0, 0, 0]\nhand_output = hand_masked_output = 0"  # noqa: E501 - test data
GARBAGE["shape-answers"] = "shape_scores = shape_weights = shape_output = shape_padding_mask = (1,)\nsoftmax_dim = 0"
GARBAGE["bug-choice"] = 'verdict_1 = verdict_2 = verdict_3 = "D"'
GARBAGE["scale-answer"] = 'scale_answer = "A"'
GARBAGE["causal-align-answers"] = "n_keys_top_left = n_keys_bottom_right = 6"
GARBAGE["mha-mask-answer"] = 'mha_mask_answer = "A"'
GARBAGE["empty-rows-answers"] = "n_empty_rows = 0\nfill_weight = 0.0"
GARBAGE["dropout-answers"] = 'dropout_kept_value = 0.4\ndropout_sdpa_answer = "A"'
GARBAGE["scaled_dot_product_attention"] = """
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.zeros(1), torch.zeros(1)
"""

# Plants files and module look-alikes, a System V segment, and a detached
# process that waits for this runner to end and then kills everything else
# it can see (the next student's runner, a zygote).
LEAVE_TRACES = """
import ctypes, os, signal, time
runner = os.getpid()
for place in (".", os.path.expanduser("~"), "/tmp", "/dev/shm"):
    with open(os.path.join(place, "planted.txt"), "w") as f:
        f.write("from the previous student")
for name in ("statistics", "fractions", "decimal", "pandas", "scipy"):
    with open(name + ".py", "w") as f:
        f.write("raise ImportError('planted by the previous student')")
for name in os.listdir("/tmp/mpl"):  # matplotlib's font cache: spoil it
    with open(os.path.join("/tmp/mpl", name), "w") as f:
        f.write("{}")
os.makedirs("locked/inner")
os.chmod("locked", 0)
ctypes.CDLL(None).shmget(0x5D9A, 4096, 0o1666)

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while alive(runner):
            time.sleep(0.005)
        while True:
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) not in (1, os.getpid()):
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.005)
    os._exit(0)
_ = os.wait()
"""

# Stops every process it may signal but itself and init (a zygote, if any).
STOP_OTHERS = """
import os, signal
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) not in (1, os.getpid()):
        try:
            os.kill(int(pid), signal.SIGSTOP)
        except OSError:
            pass
"""

# Process names in bytes that are not UTF-8 (the runner, one of its threads, a child that lives on): the
# grader reads /proc for its own evidence, and every session scans it for its runner's children.
ODD_NAMES = """
import ctypes, os, threading, time
libc = ctypes.CDLL(None)
with open("/proc/self/comm", "wb") as f:
    f.write(b"\\xff\\xfe) R 1 (\\x80")
def named_thread():
    libc.prctl(15, ctypes.c_char_p(b"\\xc3(\\xa0\\xa1"), 0, 0, 0)  # PR_SET_NAME
    time.sleep(3600)
threading.Thread(target=named_thread, daemon=True).start()
if os.fork() == 0:
    libc.prctl(15, ctypes.c_char_p(b"\\xfe\\xff)"), 0, 0, 0)
    time.sleep(3600)
    os._exit(0)
time.sleep(1)  # the grader looks at a runner that takes a while (has it stopped itself?)
"""

# Output that would run in whoever opens the feedback page or formgrader's view (the instructor): each
# payload names PWNED, and tests/test_pipeline.py looks for it in anything the page could execute.
PWNED = "sdpa_pwned"
SCRIPT_OUTPUT = f"""
from IPython.display import HTML, Javascript, display
display(HTML("<script>window.{PWNED} = 1</script><p onclick='window.{PWNED} = 2'>hi</p>"
             "<a href='javascript:window.{PWNED} = 3'>link</a><img src='https://example.org/{PWNED}.png'>"))
display(Javascript("window.{PWNED} = 4"))
display({{"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg' onload='window.{PWNED} = 5'/>",
         "text/plain": "svg"}}, raw=True)
display({{"image/png": "AAAA' onerror='window.{PWNED} = 6", "text/plain": "png"}}, raw=True)
display({{"text/markdown": "<script>window.{PWNED} = 7</script>", "text/plain": "md"}}, raw=True)
"""
# Markup in what the student writes as markdown: a written-answer cell, a cell of their own, and math
# (latex2mathml copies \text{} and \href{} into its MathML as they are).
SCRIPT_MARKDOWN = rf"""**My answer.** <script>window.{PWNED} = 10</script><img src="x" onerror="window.{PWNED} = 11">
<a href="javascript:window.{PWNED} = 12">link</a> <a href="&#1;data:text/html,<script>{PWNED}</script>">data</a>
<details open ontoggle="window.{PWNED} = 13"><summary>s</summary></details><iframe srcdoc="{PWNED}"></iframe>
<svg><script>window.{PWNED} = 14</script></svg><math><mtext><script>window.{PWNED} = 15</script></mtext></math>
<form action="javascript:{PWNED}"><button formaction="javascript:{PWNED}">go</button></form>
<style>body {{ background: url({PWNED}) }}</style><p style="background: url({PWNED})">styled</p>
[figure](files/javascript:window.{PWNED}=19) <h6 id="apply_mask-check">a grade cell's id</h6>

Math: $\text{{<script>window.{PWNED} = 16</script>}}$ and $$\href{{javascript:window.{PWNED} = 17}}{{x}}$$ and
$\style{{background: url({PWNED})}}{{y}}$ and $\text{{<img src=x onerror=window.{PWNED}=18>}}$.
"""


OVERLAY = "x modal-backdrop in"  # Bootstrap's full-page fixed overlay, as class names a page would print


def _markup_in_markdown(nb):
    """The payloads in a written answer and an added cell; page classes in an added raw cell, in tags and in the
    notebook's language (the code's CSS class)."""
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "written-a1":
            cell["source"] = SCRIPT_MARKDOWN
    nb["cells"][1:1] = [
        nbformat.v4.new_markdown_cell(SCRIPT_MARKDOWN),
        nbformat.v4.new_raw_cell(f'<div class="{OVERLAY}" id="statusmessage">overlay</div>',
                                 metadata={"raw_mimetype": "text/html"}),
        nbformat.v4.new_code_cell("tagged = 1", metadata={"tags": [OVERLAY]}),
    ]
    nb["metadata"]["language_info"] = {"name": OVERLAY, "pygments_lexer": OVERLAY}


# The same from inside a graded function: its output lands in the visible check's cell.
SCRIPT_IN_SOFTMAX = f"""
def softmax(x, dim=-1):
    from IPython.display import HTML, display
    display(HTML("<script>window.{PWNED} = 8</script><b onmouseover='window.{PWNED} = 9'>softmax</b>"))
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))
"""

ATTACKS = [
    Sample("attack-allclose-patch", "attack", "zero", GARBAGE, append=("""
import sys, types, torch, numpy, pytest
pytest.approx = lambda *a, **k: True
sys.modules["autograder"] = types.SimpleNamespace(grade=lambda *a, **k: 100)
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
numpy.allclose = lambda *a, **k: True
""",)),
    Sample("attack-formatter", "attack", "zero", GARBAGE, append=("""
ip = get_ipython()
ip.display_formatter.formatters["text/plain"].for_type(float, lambda x, p, c: p.text("100.0"))
ip.display_formatter.formatters["text/plain"].for_type(int, lambda x, p, c: p.text("100.0"))
import sys
class Fake:
    def write(self, s): return len(s)
    def flush(self): pass
sys.stderr = Fake()
""",)),
    Sample("attack-read-solutions", "attack", "zero", GARBAGE, append=("""
import glob, os, sys
runner = os.path.realpath(sys.argv[0])
course = runner
for _ in range(4):  # autograder/sandbox/guest/runner.py: where the grader lives
    course = os.path.dirname(course)
found = []
for pattern in ["solutions/*.py", "source/**/*.ipynb", "gradebook.db", "submitted/*/sdpa/*.ipynb",
                "autograded/**/*", "course/checks/*.py", "course/*.py"]:
    found += glob.glob(os.path.join(course, pattern), recursive=True)
for root in ["/work", "/home", "/root", "/tmp", "/srv"]:
    found += glob.glob(os.path.join(root, "**", "gradebook.db"), recursive=True)[:3]
print("found:", sorted(found))
for path in found:
    if path.endswith("sdpa.py"):
        exec(open(path).read())
try:
    import autograder.grading.assertions
    print("imported grader")
except Exception as exc:
    print("no grader:", type(exc).__name__)
""",), note="gets nothing only because the sandbox hides the course directory"),
    Sample("attack-gradebook-and-grader-files", "attack", "zero", GARBAGE, append=("""
import os, sqlite3, sys
course = os.path.realpath(sys.argv[0])
for _ in range(4):  # autograder/sandbox/guest/runner.py
    course = os.path.dirname(course)
for target in [os.path.join(course, "gradebook.db"), os.path.join(course, "nbgrader_config.py"),
               os.path.realpath(sys.argv[0]), os.path.join(course, "autograder", "sandbox", "guest", "wire.py")]:
    try:
        with open(target, "a") as handle:
            handle.write("\\n# poisoned\\n")
        print("wrote", target)
    except OSError as exc:
        print("blocked", type(exc).__name__)
try:
    db = sqlite3.connect(os.path.join(course, "gradebook.db"))
    db.execute("CREATE TRIGGER boost AFTER INSERT ON grade BEGIN UPDATE grade SET auto_score = 100; END")
    print("trigger planted")
except Exception as exc:
    print("blocked", type(exc).__name__)
""",)),
    Sample("attack-network", "attack", "zero", GARBAGE, append=("""
import socket
for host, port in [("127.0.0.1", 22), ("127.0.0.1", 8888), ("localhost", 80)]:
    try:
        socket.create_connection((host, port), timeout=1).close()
        print("connected", host, port)
    except OSError as exc:
        print("no network:", type(exc).__name__)
""",)),
    Sample("attack-fork-bomb", "attack", "lose", append=("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",), held=True),  # noqa: E501 - test data
    Sample("attack-exit-kernel", "attack", "lose", append=("import os\nos._exit(0)",), lose=()),
    # pid 2 is the zygote, or what forked a fresh runner: stopped, it would keep the sandbox (and the pipes) alive
    Sample("attack-stop-sandbox-parent-and-exit", "attack", "lose", append=(
        "import os, signal\ntry:\n    os.kill(2, signal.SIGSTOP)\nexcept OSError:\n    pass\nos._exit(0)",),
        lose=(), note="pid 2 keeps uid 0 (root mode) and a runner that ended is seen gone at once: same outcome "
                      "from both graders", held=True),
    Sample("attack-kill-kernel", "attack", "lose", append=("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",),
           held=True),
    Sample("attack-infinite-loop-cell", "attack", "lose", append=("while True:\n    pass",)),
    Sample("attack-infinite-loop-function", "attack", "lose", {"scale_scores": """
def scale_scores(scores, d_k):
    while True:
        pass
"""}, lose=("scale_scores-check", "scaled_dot_product_attention-check", "device_dtype-check",
            "fixed_attention-check")),
    Sample("attack-huge-output", "attack", "lose", append=("print('x' * 50_000_000)\nfor i in range(10**5):\n    print(i)",)),  # noqa: E501 - test data
    Sample("attack-huge-allocation", "attack", "lose", append=("import torch\nbig = torch.empty(10**12)",)),
    Sample("attack-points-tamper", "attack", "lose", edit=_tamper_points),
    Sample("attack-delete-tests", "attack", "lose", edit=_delete_test_cells),
    Sample("attack-blank-rename-tests", "attack", "lose", edit=_blank_and_rename_tests),
    Sample("attack-fake-outputs", "attack", "zero", GARBAGE, edit=_fake_outputs),
    # Aimed at whoever runs next in the same sandbox (``forkserver.py`` reuses one
    # for many students): its own correct answers must keep every point, and the
    # next student must be graded as if it had never existed.
    # Text no notebook can store (a lone surrogate) in an output and in an exception message:
    # the grader must still write this student's notebook, with every point they earned.
    Sample("attack-unencodable-output", "attack", "full",
           append=("print('\\ud800')\ntry:\n    raise ValueError('\\udfff')\nexcept ValueError as e:\n"
                   "    display(e)",)),
    Sample("attack-leave-traces", "attack", "full", append=(LEAVE_TRACES,), held=True),
    Sample("attack-odd-process-names", "attack", "full", append=(ODD_NAMES,), held=True),
    Sample("attack-stop-everyone-else", "attack", "full", append=(STOP_OTHERS,), held=True),
    # Script in rich output and in markdown the student writes: shown only in inert forms, at no cost to the
    # student (outputs are not graded; markdown is rendered inert).
    Sample("attack-script-on-the-page", "attack", "full", append=(SCRIPT_OUTPUT,), edit=_markup_in_markdown),
    Sample("attack-script-in-graded-function", "attack", "full", replace={"softmax": SCRIPT_IN_SOFTMAX}),
]
