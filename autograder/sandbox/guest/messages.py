"""The guest's own student-facing messages, in the notebook's language.

The guest imports nothing of the host, so it cannot read the catalogs: the
trusted side sends the translations of these ids (`IDS`) with a runner's
first request and `use` keeps them.  An id is the Chinese text, as everywhere
in the grader, and ``make messages`` extracts these with the host's.  Only the
student's own notebook shows what this module returns, so a runner that
ignores or rewrites the translations changes nothing but its own wording.
"""


def N_(message: str) -> str:  # noqa: N802 - gettext's marker: extracted here, translated where shown
    return message


FORBIDDEN_FUNCTION = N_("评分时禁止使用 {name}：请自己实现这一步。")
FORBIDDEN_KERNEL = N_("评分时禁止使用内置 softmax/注意力（{name}）。")
EXIT_IGNORED = N_("exit() 在评分时被忽略。")
BUILTIN_STATEMENT_SKIPPED = N_("评分时内置函数被禁用：用到它的语句没有运行，用到那条语句结果的语句也跳过了；"
                               "这个单元格的其余语句照常运行，你定义的函数照常评分。"
                               "想和内置函数对比，请放在单独的草稿单元格里。")
MODULE_STATEMENT_SKIPPED = N_("评分环境里没有安装这个模块：这条语句没有运行，用到它结果的语句也跳过了；"
                              "这个单元格的其余语句照常运行，你定义的函数照常评分（只要它们不用这个模块）。")
DISPLAY_TRUNCATED = N_("[输出过大，已截断]")
STREAM_TRUNCATED = N_("[输出过长，已截断]")
# Why a returned tensor carries no values: read on the host (`wire.TensorSpec.missing_data`).
TENSOR_SUBCLASS = N_("返回的是张量子类 {subclass}，不是普通的 torch.Tensor")
TENSOR_LAYOUT = N_("返回的是 {layout} 布局的张量，不是普通（稠密）张量")
TENSOR_NO_VALUES = N_("评分进程没有收到这个张量的数值")

IDS = (FORBIDDEN_FUNCTION, FORBIDDEN_KERNEL, EXIT_IGNORED, BUILTIN_STATEMENT_SKIPPED, MODULE_STATEMENT_SKIPPED,
       DISPLAY_TRUNCATED, STREAM_TRUNCATED, TENSOR_SUBCLASS, TENSOR_LAYOUT, TENSOR_NO_VALUES)
MAX_TRANSLATION_CHARS = 500

_translations: dict = {}


def use(translations: object) -> None:
    """Keep the translations the grader sent ({id: text}); anything else in them is ignored."""
    if not isinstance(translations, dict):
        return
    _translations.clear()
    _translations.update({k: v for k, v in translations.items()
                          if k in IDS and isinstance(v, str) and len(v) <= MAX_TRANSLATION_CHARS})


def _(message: str) -> str:
    """`message` (one of `IDS`) in the language the grader asked for; the id itself by default."""
    return _translations.get(message, message)
