"""Decorated functions made reachable for mutmut: the sweep's private copy spells a decorator as an assignment.

mutmut 3.8.1 leaves every function with a decorator (other than a lone @staticmethod or @classmethod) without
a single mutant, so engine code under `@torch.inference_mode()`, `@torch.no_grad()`, `@property` or
`@functools.cache` would never be swept. In the copy, and only there, such a function

    @torch.inference_mode()                     _dflash_decorators_1 = (torch.inference_mode(),)
    def generate(self, ...):          ->        def generate(self, ...):
        ...                                         ...
                                                generate = _dflash_decorators_1[0](generate)
                                                del _dflash_decorators_1

which is what the decorator syntax means (the decorator expressions are evaluated before the def, so
`@x.setter` still sees the property, and applied bottom-up after it). mutmut then trampolines the plain def,
and the decorators wrap the trampoline. Functions with @staticmethod or @classmethod among other decorators
are left alone (mutmut's trampoline must know how a method is bound), and so are names defined twice in one
scope (a property and its setter): both are reported as still skipped.

Pure text and `ast`; knows nothing of mutmut's process or files.
"""

from __future__ import annotations

import ast

from verify.sweep.source import functions

__all__ = ["PREFIX", "undecorate"]

PREFIX = "_dflash_decorators_"
_BINDING = frozenset({"staticmethod", "classmethod"})


def _nodes(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[f"{node.name}.{child.name}"] = child
    return found


def undecorate(source: str) -> tuple[str, tuple[str, ...]]:
    """(the source with every rewritable decorated function spelt as an assignment, the functions rewritten as
    "func" or "Class.method"). A later definition of the same name wins, as `functions` reports it."""
    tree = ast.parse(source)
    nodes = _nodes(tree)
    lines = source.splitlines(keepends=True)
    spans = functions(source)
    names = [span.function for span in spans]
    # A name defined twice in one scope (a property and its setter) would give mutmut two trampolines with one
    # name: those stay as they are, and are reported as skipped.
    chosen = [
        span
        for span in spans
        if span.is_skipped_by_mutmut
        and not _BINDING & {d.rpartition(".")[2] for d in span.decorators}
        and names.count(span.function) == 1
    ]
    rewritten = []
    # Bottom-up, so the line numbers of the spans still to rewrite stay valid.
    for index, span in sorted(enumerate(chosen, start=1), key=lambda item: -item[1].start):
        node = nodes.get(span.function)
        if node is None or node.lineno != span.def_line or node.end_lineno is None:
            continue
        segments = [ast.get_source_segment(source, d) for d in node.decorator_list]
        if any(s is None for s in segments):
            continue
        first_decorator = min(d.lineno for d in node.decorator_list)
        def_text = lines[node.lineno - 1]
        indent = def_text[: len(def_text) - len(def_text.lstrip())]
        holder = f"{PREFIX}{index}"
        applied = node.name
        for position in reversed(range(len(segments))):
            applied = f"{holder}[{position}]({applied})"
        after = [f"{indent}{node.name} = {applied}\n", f"{indent}del {holder}\n"]
        body_end = node.end_lineno
        if not lines[body_end - 1].endswith("\n"):
            lines[body_end - 1] += "\n"
        lines[body_end:body_end] = after
        before = f"{indent}{holder} = ({', '.join(str(s) for s in segments)},)\n"
        lines[first_decorator - 1 : node.lineno - 1] = [before]
        rewritten.append(span.function)
    text = "".join(lines)
    compile(text, "<undecorated>", "exec", dont_inherit=True)  # a rewrite that breaks the module is a bug here
    return text, tuple(sorted(rewritten))
