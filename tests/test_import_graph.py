"""The engine's import graph: layered (``.importlinter``, checked by ``make lint``) and free of cycles."""
import grimp


def _cycles(graph, modules):
    """Strongly connected groups of more than one module (Tarjan), as sorted lists."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return out


def test_no_module_of_the_engine_imports_one_that_imports_it_back():
    graph = grimp.build_graph("autograder", cache_dir=None)
    # A package's __init__ re-exporting its modules is not a cycle between modules.
    modules = {m for m in graph.modules if not graph.find_children(m)}
    assert len(modules) > 50
    assert _cycles(graph, modules) == []


def test_no_module_of_the_engine_and_the_course_imports_one_that_imports_it_back():
    graph = grimp.build_graph("autograder", "course", cache_dir=None)
    modules = {m for m in graph.modules if not graph.find_children(m)}
    assert _cycles(graph, modules) == []


def test_every_declaration_module_of_the_course_is_held_by_the_course_contract():
    """A new part's module joins `.importlinter`'s course contract, which keeps it free of the engine."""
    import configparser
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    config = configparser.ConfigParser()
    config.read(root / ".importlinter")
    held = set(config["importlinter:contract:course"]["source_modules"].split())
    declared = {f"course.{p.stem}" for p in (root / "course").glob("*.py") if p.name != "__init__.py"}
    assert declared == held


def test_the_cycle_finder_finds_a_cycle():
    class Graph:
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, module):
            return self.edges.get(module, set())

    assert _cycles(Graph(), {"a", "b", "c", "d"}) == [["a", "b", "c"]]
