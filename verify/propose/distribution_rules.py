"""Rules for the sampling distribution's bug classes: temperature not applied or applied twice, a top-k/top-p filter
dropped from one call (one model's side of p/q), the softmax's dimension.

As in `sampling_rules`, `scan` is the scanner's reading of whole files; a template's anchor needs no context.
Knows `ast`; nothing of files or imports.
"""

from __future__ import annotations

import ast

from verify.propose.edit import BugClass, Edit, Found, called, name_parts
from verify.propose.source import Source

__all__ = ["filters", "softmax", "temperature"]

Owners = dict[ast.AST, ast.stmt]


def _is_check(name: str) -> bool:
    """A predicate or a validation (is_number, isinstance, check_request): its argument is read, not applied."""
    return name.lstrip("_").startswith(("is", "check", "valid", "assert")) or name in ("len", "float", "int", "str")


def _mentions_temperature(src: Source, node: ast.AST) -> bool:
    return bool(name_parts(src.source(node)) & {"temperature", "temp", "temperatures"})


def temperature(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    for node in src.nodes(ast.BinOp):  # logits / T: not applied, or applied twice
        if isinstance(node.op, ast.Div) and _mentions_temperature(src, node.right):
            none = "Temperature is not applied: the logits are sampled at temperature 1."
            found.append(Edit(BugClass.TEMPERATURE, node, src.source(node.left), none))
            twice = "Temperature is applied twice: the logits are divided by T once more."
            found.append(Edit(BugClass.TEMPERATURE, node, f"{src.source(node)} / {src.atom(node.right)}", twice))
    for call in src.nodes(ast.Call):  # sampling_probs(logits, p.temperature): this side at temperature 1
        name = called(call)
        if not name or name[0].isupper() or "temperature" in name.lower() or _is_check(name):
            continue
        what = f"This {name}() call runs at temperature 1 instead of the request's (one side of p/q untempered)."
        if name in ("enumerate", "zip", "range", "append", "extend", "len", "list", "tuple", "print"):
            continue
        for arg in call.args:  # a scalar temperature handed on (a list of them is a batch's, left alone)
            if isinstance(arg, ast.Name | ast.Attribute) and _mentions_temperature(src, arg):
                found.append(Edit(BugClass.TEMPERATURE, arg, "1.0", what))
        for keyword in call.keywords:
            if keyword.arg and "temp" in keyword.arg.lower():
                found.append(Edit(BugClass.TEMPERATURE, keyword.value, "1.0", what))
    return found


_FILTER_WORDS = {"top_k", "top_p", "topk", "topp", "min_p"}


def _words_filter(text: str) -> bool:
    return any(word in text.lower() for word in _FILTER_WORDS)


def _is_filter(src: Source, node: ast.AST) -> bool:
    return _words_filter(src.source(node))


_SAMPLED_WORDS = {"logits", "scores", "probs", "prob", "temperature", "temp", "distribution", "dist"}


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _samples(src: Source, call: ast.Call) -> bool:
    """The call turns a model's scores into a distribution: one of its other arguments is the logits, the
    probabilities or the temperature (`sampling_probs(logits[row], p.temperature, p.top_p, p.top_k)`)."""
    values = [*call.args, *(k.value for k in call.keywords)]
    return any(name_parts(src.source(v)) & _SAMPLED_WORDS for v in values if not _is_filter(src, v))


def filters(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    for call in src.nodes(ast.Call):
        name = called(call)
        if not name or name[0].isupper() or _is_check(name) or any(word in name.lower() for word in _FILTER_WORDS):
            continue  # torch.topk is the filter itself; a record's constructor only stores it
        if scan and not _samples(src, call):
            continue  # cls(..., selector_top_k=...): a record built, not a distribution filtered
        positional = [i for i, arg in enumerate(call.args) if _is_filter(src, arg) and not _is_text(arg)]
        keywords = [k for k in call.keywords if k.arg and (_words_filter(k.arg) or _is_filter(src, k.value))]
        trailing = positional and positional == list(range(len(call.args) - len(positional), len(call.args)))
        if not keywords and not trailing:
            continue
        kept = [src.source(a) for i, a in enumerate(call.args) if i not in positional]
        kept += [src.source(k) for k in call.keywords if k not in keywords]
        what = f"This {name}() call drops the request's top-k/top-p filter (applied on one side of p/q only)."
        found.append(Edit(BugClass.FILTERS, call, f"{src.source(call.func)}({', '.join(kept)})", what))
    for node in src.nodes(ast.If):
        if all(isinstance(statement, ast.Raise) for statement in node.body):
            continue  # a validation: `if not 0 < top_p <= 1: raise ...`
        if _is_filter(src, node.test):
            what = "The top-k/top-p filter is skipped: its branch never runs."
            found.append(Edit(BugClass.FILTERS, node.test, "False", what))
    return found


def softmax(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    what = "The softmax normalises over the wrong dimension."
    for call in src.nodes(ast.Call):
        if called(call) not in ("softmax", "log_softmax"):
            continue
        dims = [k.value for k in call.keywords if k.arg in ("dim", "axis")]
        method = isinstance(call.func, ast.Attribute) and not (
            isinstance(call.func.value, ast.Name) and call.func.value.id in ("torch", "F", "np", "scipy", "special")
        )
        dims += call.args[0 if method else 1 : 2 if not method else 1] if not dims else []
        if len(dims) != 1 or not (isinstance(dims[0], ast.Constant) or isinstance(dims[0], ast.UnaryOp)):
            continue
        dim = ast.literal_eval(dims[0])
        if isinstance(dim, int):
            found.append(Edit(BugClass.SOFTMAX, dims[0], str(-2 if dim == -1 else (dim - 1 if dim > 0 else 1)), what))
    return found
