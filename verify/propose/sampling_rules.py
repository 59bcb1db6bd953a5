"""Rules for the acceptance rule's bug classes: the ratio p/q inverted, the residual max(p - q, 0) without the draft
or its clamp, acceptance run past the first rejection, the bonus row off by one (the sampling distribution's are
in `distribution_rules`).

A rule reads a parsed `Source` and returns what it found. `scan`: the scanner reads whole files, so a rule asks
for the class's context there (a statement about probabilities, residuals, the bonus); a template is handed the
anchor its user chose, so it does not. Knows `ast`; nothing of files or imports.
"""

from __future__ import annotations

import ast
import re

from verify.propose.edit import BugClass, Edit, Found, Refusal, called, header_text, minus_one, name_parts
from verify.propose.source import Source

__all__ = ["acceptance", "bonus", "ratio", "residual", "residual_clamp", "residual_draft"]

Owners = dict[ast.AST, ast.stmt]
# A name of a probability: p, q, px, q_i, probs, target_probs, draft_p, log_q.
_PROB = re.compile(
    r"(?<![A-Za-z0-9_])([pq][a-z]?|p_\w+|q_\w+|\w*probs?\w*|\w*(target|draft)\w*|log_?[pq]\w*)(?![A-Za-z0-9_])"
)
_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_NORMALISER = re.compile(r"sum\(|norm|total|temperature|clamp|softmax|max\(")


def _probish(src: Source, node: ast.AST) -> bool:
    text = src.source(node)
    return bool(_PROB.search(text)) and "top_p" not in text


def _context(src: Source, owners: Owners, node: ast.AST) -> set[str]:
    return name_parts(header_text(src, owners[node])) if node in owners else set()


def _is_log(src: Source, node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and called(node) in ("log", "log_softmax", "log2", "log10"):
        return True
    return any(word.startswith("log") for word in name_parts(src.source(node)))


def ratio(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    what = "The acceptance ratio is inverted (q/p for p/q): drafts the target dislikes are kept."
    exponents = {id(call.args[0]) for call in src.nodes(ast.Call) if called(call) == "exp" and call.args}
    for node in src.nodes(ast.BinOp):
        if isinstance(node.op, ast.Div):  # p / q -> q / p
            if scan and not (_probish(src, node.left) and _probish(src, node.right)):
                continue
            if scan and _NORMALISER.search(src.source(node.right)):
                continue  # probs / probs.sum(): a normalisation, not a ratio
            found.append(Edit(BugClass.RATIO, node, f"{src.atom(node.right)} / {src.atom(node.left)}", what))
        elif isinstance(node.op, ast.Sub) and (
            id(node) in exponents or _is_log(src, node.left) and _is_log(src, node.right)
        ):
            # log p - log q -> log q - log p (the ratio in log space; exp(a - b) is the same swap)
            found.append(Edit(BugClass.RATIO, node, f"{src.atom(node.right)} - {src.atom(node.left)}", what))
    for node in src.nodes(ast.Compare):  # u * q < p -> u * p < q (the rule cross-multiplied)
        if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Lt | ast.LtE | ast.Gt | ast.GtE):
            continue
        left, right = node.left, node.comparators[0]
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mult) and not isinstance(right, ast.BinOp):
            if not (_probish(src, left.right) and _probish(src, right)):
                continue
            text = f"{src.atom(left.left)} * {src.atom(right)} {_OPS[type(node.ops[0])]} {src.atom(left.right)}"
            found.append(Edit(BugClass.RATIO, node, text, what))
    return found


_ZERO_CLAMPS = ("clamp", "clamp_min", "clip", "relu", "maximum", "max")


def _zero_clamp(src: Source, node: ast.Call) -> ast.AST | None:
    """The clamped expression of max(x, 0), x.clamp(min=0), x.clamp_min(0), torch.clamp(x, min=0), relu(x)."""
    name = called(node)
    if name not in _ZERO_CLAMPS:
        return None
    method = isinstance(node.func, ast.Attribute) and not (
        isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "np", "numpy", "F", "math")
    )
    values = [node.func.value] if method else []  # type: ignore[attr-defined]
    args = [*values, *node.args]
    if not args:
        return None
    zero = [a for a in args[1:] if isinstance(a, ast.Constant) and a.value == 0]
    zero += [
        k.value for k in node.keywords if k.arg == "min" and isinstance(k.value, ast.Constant) and k.value.value == 0
    ]
    if name == "relu" or zero:
        return args[0]
    return None


def residual(src: Source, owners: Owners, scan: bool) -> list[Found]:
    """Both residual bugs: the draft dropped, and the clamp dropped."""
    return residual_draft(src, owners, scan) + residual_clamp(src, owners, scan)


def _clamps(src: Source) -> dict[int, ast.Call]:
    return {id(inner): call for call in src.nodes(ast.Call) if (inner := _zero_clamp(src, call)) is not None}


def residual_draft(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    clamps = {id(inner): call for call in src.nodes(ast.Call) if (inner := _zero_clamp(src, call)) is not None}
    for node in src.nodes(ast.BinOp):
        if not isinstance(node.op, ast.Sub):
            continue
        in_clamp = id(node) in clamps
        if scan and not (
            in_clamp or "residual" in _context(src, owners, node) or "resid" in src.source(owners.get(node, node))
        ):
            continue
        if scan and not (_probish(src, node.left) and _probish(src, node.right)):
            continue
        what = "The residual max(p - q, 0) is taken without the draft's q: after a rejection the token comes from p."
        found.append(Edit(BugClass.RESIDUAL, node, src.atom(node.left), what))
    for call in src.nodes(ast.Call):  # p.scatter_add(1, idx, -q): the draft subtracted through an index
        negated = [a for a in call.args if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub)]
        if called(call) in ("scatter_add", "index_add") and negated and isinstance(call.func, ast.Attribute):
            if not scan or "residual" in _context(src, owners, call):
                what = "The residual keeps p where it should subtract the draft's q (the scatter of -q dropped)."
                found.append(Edit(BugClass.RESIDUAL, call, src.atom(call.func.value), what))
    return found


def residual_clamp(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    for inner_id, call in _clamps(src).items():
        inner = next(n for n in ast.walk(call) if id(n) == inner_id)
        if scan and "residual" not in _context(src, owners, call) and not isinstance(inner, ast.BinOp):
            continue
        if scan and not _probish(src, inner) and "residual" not in _context(src, owners, call):
            continue
        if scan and _sampled_by_a_checking_draw(src, call):
            why = "the residual is drawn from by a sampler that refuses negative entries (multinomial, choice): "
            found.append(Refusal(BugClass.RESIDUAL, call, why + "without its clamp the mutant could only crash"))
            continue
        what = "The residual p - q is not clamped at 0: negative mass enters the resampling law."
        found.append(Edit(BugClass.RESIDUAL, call, src.atom(inner), what))
    return found


# Samplers that raise on a negative probability: torch.multinomial, numpy's Generator.choice(p=...),
# torch.distributions.Categorical(probs=...) with validation.
_CHECKING_DRAWS = {"multinomial", "choice", "Categorical"}


def _sampled_by_a_checking_draw(src: Source, node: ast.AST) -> bool:
    """The function holding `node` draws with a sampler that refuses negative probabilities."""
    for function in src.nodes((ast.FunctionDef, ast.AsyncFunctionDef)):
        inside = set(map(id, ast.walk(function)))
        if id(node) in inside:
            innermost = [f for f in ast.walk(function) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
            if any(id(node) in set(map(id, ast.walk(f))) for f in innermost if f is not function):
                continue  # a nested function holds it: judged on its own
            return any(isinstance(n, ast.Call) and called(n) in _CHECKING_DRAWS for n in ast.walk(function))
    return False


def acceptance(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    what = "Acceptance counts every accepted draft, not the run before the first rejection."
    for node in src.nodes(ast.Call):
        if called(node) != "cumprod":
            continue
        func = node.func
        is_method = isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id in ("torch", "np", "numpy")
        )  # match.cumprod(1), not torch.cumprod(match, 1)
        if not is_method and not node.args:
            continue
        inner = func.value if is_method else node.args[0]  # type: ignore[attr-defined]
        found.append(Edit(BugClass.ACCEPTANCE, node, src.atom(inner), what))
    for node in src.nodes(ast.Compare):  # ((~accepted).cumsum(-1) < 1): no rejection yet
        left = node.left
        if not (isinstance(left, ast.Call) and called(left) == "cumsum" and len(node.ops) == 1):
            continue
        is_method = isinstance(left.func, ast.Attribute) and not (
            isinstance(left.func.value, ast.Name) and left.func.value.id in ("torch", "np", "numpy")
        )
        counted = left.func.value if is_method else (left.args[0] if left.args else None)  # type: ignore[attr-defined]
        if counted is None:
            continue
        if isinstance(counted, ast.UnaryOp) and isinstance(counted.op, ast.Invert | ast.Not):
            text = src.atom(counted.operand)
        else:
            text = f"({src.source(counted)}) == 0"
        found.append(Edit(BugClass.ACCEPTANCE, node, text, what))
    if not scan:  # an anchor such as `if d != t:\n    break` holds no loop of its own
        found += [Edit(BugClass.ACCEPTANCE, node, "continue", what) for node in src.nodes(ast.Break)]
        return found
    for loop in src.nodes((ast.For, ast.While)):
        for node in ast.walk(loop):
            if isinstance(node, ast.Break) and _innermost_loop(loop, node) and _ends_a_run(src, loop, node):
                found.append(Edit(BugClass.ACCEPTANCE, node, "continue", what))
    return found


# A loop over drafted tokens names them in its header: `for d, t in zip(drafted, target)`, `for i in range(len(
# draft_ids))`, `while n < num_accepted`. Its body is not read: a scheduler's `while waiting: ... draft_pool ...
# break` stops on a full pool, not on a rejection, and `continue` there is a different bug (out of this class).
_RUN_WORDS = {
    "accept", "accepted", "reject", "rejected", "draft", "drafted", "drafts", "proposal", "proposed", "proposals",
    "candidate", "candidates", "speculated", "spec", "guess", "guesses", "match", "matches", "matched",
}  # fmt: skip
# Or the break's guard is the acceptance test itself: a uniform against a probability or ratio (`if r > p / q`),
# or a token compared with a drafted one (`if draft[i] != target[i]`).
_GUARD_WORDS = {"u", "r", "rand", "uniform", "ratio", "accept", "reject", "p", "q", "prob", "probs"}


def _ends_a_run(src: Source, loop: ast.For | ast.While, brk: ast.Break) -> bool:
    """The break ends the run of accepted drafts: its loop walks drafted tokens, or its guard is the acceptance
    test (a plain decoding loop's `if token == eos: break` is neither)."""
    header = [loop.target, loop.iter] if isinstance(loop, ast.For) else [loop.test]
    if name_parts(" ".join(src.source(part) for part in header)) & _RUN_WORDS:
        return True
    guard = next((n for n in ast.walk(loop) if isinstance(n, ast.If) and any(b is brk for b in n.body)), None)
    if guard is None:
        return False
    for compare in (n for n in ast.walk(guard.test) if isinstance(n, ast.Compare)):
        words = name_parts(src.source(compare))
        if _value_words(compare) & _GUARD_WORDS:
            return True
        tokens = any(isinstance(op, ast.NotEq | ast.Eq) for op in compare.ops)
        if tokens and words & _RUN_WORDS and not any(isinstance(n, ast.Constant) for n in compare.comparators):
            return True
    return False


def _value_words(node: ast.AST) -> set[str]:
    """The words of the values a comparison reads: names and attributes, but not a name read only for one of its
    attributes. `p._version != version` reads a version (p is a parameter whose version is checked), not a
    probability p; `u > p[i] / q[i]` reads u, p and q."""
    bases = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    words: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and id(n) not in bases:
            words |= name_parts(n.id)
        elif isinstance(n, ast.Attribute):
            words |= name_parts(n.attr)
    return words


def _innermost_loop(loop: ast.AST, target: ast.AST) -> bool:
    """`target` sits in `loop` itself, not in a loop nested inside it."""
    for child in ast.iter_child_nodes(loop):
        if child is target:
            return True
        if isinstance(child, ast.For | ast.While | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if _innermost_loop(child, target):
            return True
    return False


_BONUS = {"bonus", "correction", "next", "last", "extra"}


def _row_indices(node: ast.Subscript, scan: bool) -> list[ast.AST]:
    """The indices of a subscript that pick a row: p[n], p[:, n, :] (never a slice or, when scanning, a constant)."""
    if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return []  # p.shape[1] is a size, not a row
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    picked = [
        p for p in parts if not isinstance(p, ast.Slice) and not (isinstance(p, ast.Constant) and p.value is None)
    ]
    if scan:
        picked = [p for p in picked if not isinstance(p, ast.Constant)]
    return [p for p in picked if not (isinstance(p, ast.Constant) and p.value is Ellipsis)]


def _bonus_sites(src: Source, owners: Owners) -> set[int]:
    """Statements that pick the bonus row: an assignment to a bonus/next token, or a `return` of an acceptance
    function (accept, verify, speculative, sample in its name)."""
    sites: set[int] = set()
    for function in src.nodes((ast.FunctionDef, ast.AsyncFunctionDef)):
        if name_parts(function.name) & {"accept", "verify", "speculative", "sample", "rejection"}:
            sites.update(id(n) for n in ast.walk(function) if isinstance(n, ast.Return))
    for node in src.nodes(ast.Assign):
        if name_parts(" ".join(src.source(t) for t in node.targets)) & _BONUS:
            sites.add(id(node))
    return sites


_ROWS = {"row", "rows", "i", "b", "r", "batch", "idx", "j"}


def _bonus_context(src: Source, owners: Owners, sites: set[int], node: ast.AST) -> bool:
    statement = owners.get(node)
    if statement is None or id(statement) not in sites:
        return False
    if isinstance(statement, ast.Assign) and any(node in set(ast.walk(t)) for t in statement.targets):
        return False  # bonus[row] = ...: where it is stored, not where it is drawn from
    return True


def bonus(src: Source, owners: Owners, scan: bool) -> list[Found]:
    found: list[Found] = []
    what = "The bonus token is drawn from the row before the right one (an off-by-one in its index)."
    sites = _bonus_sites(src, owners) if scan else set()
    for node in src.nodes(ast.Subscript):
        if scan and not (_bonus_context(src, owners, sites, node) and _probish(src, node.value)):
            continue
        for index in _row_indices(node, scan):
            if isinstance(index, ast.Subscript) and index in _nested_index(node):
                continue
            if scan and name_parts(src.source(index)) & _ROWS:
                continue
            found.append(Edit(BugClass.BONUS, index, minus_one(src, index), what))
    for call in src.nodes(ast.Call):  # argmax.gather(1, accepted[:, None]): the row picked by an index tensor
        if called(call) in ("gather", "index_select", "take_along_dim") and len(call.args) >= 2:
            if scan and not _bonus_context(src, owners, sites, call):
                continue
            index = call.args[1]
            found.append(Edit(BugClass.BONUS, index, f"({minus_one(src, index)}).clamp(min=0)", what))
    return _outermost(found)


def _nested_index(node: ast.Subscript) -> set[ast.AST]:
    return {n for n in ast.walk(node.slice) if isinstance(n, ast.Subscript)}


def _outermost(found: list[Found]) -> list[Found]:
    """One edit per node: an index inside another edited index is left to the outer one."""
    spans = [f.node for f in found]
    inner = {id(n) for outer in spans for n in ast.walk(outer) if n is not outer}
    return [f for f in found if id(f.node) not in inner]
