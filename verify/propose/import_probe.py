"""The import probe, run as `main(REQUEST, RESULT)` in a private copy of the project (`verify.propose.check`
starts it, confined): each mutant's text is executed as its module would be imported (its package and the
original module imported first, the mutant in a fresh module object under the module's name), and whether that
raised is written as JSON. Knows importlib; nothing of proposals, bug classes or the user's tree.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import traceback
from pathlib import Path

__all__ = ["import_mutant", "main"]


def import_mutant(module: str, path: str, text: str) -> str:
    """ "" when the mutant's text runs as `module` does on import, else the error in a line."""
    try:
        importlib.import_module(module)
    except BaseException as error:  # the original itself does not import here: nothing to compare against
        return f"the original module {module} does not import here: {type(error).__name__}: {error}"
    is_package = Path(path).name == "__init__.py"
    spec = importlib.util.spec_from_loader(module, loader=None, origin=path, is_package=is_package)
    assert spec is not None
    mutant = importlib.util.module_from_spec(spec)
    mutant.__file__ = path
    if is_package:
        mutant.__path__ = [str(Path(path).parent)]
    original = sys.modules[module]
    sys.modules[module] = mutant  # decorators (dataclass) look their module up by name
    try:
        exec(compile(text, path, "exec", dont_inherit=True), mutant.__dict__)
    except BaseException as error:
        line = traceback.extract_tb(error.__traceback__)[-1].lineno if error.__traceback__ else "?"
        return f"importing the mutant raised {type(error).__name__} (line {line}): {error}"
    finally:
        sys.modules[module] = original
    return ""


def main(request: str, result: str) -> None:
    asked = json.loads(Path(request).read_text())
    sys.path[:0] = asked["paths"]  # the copy's source roots, ahead of anything installed
    items = asked["items"]
    answers = {item["key"]: import_mutant(item["module"], item["path"], item["text"]) for item in items}
    Path(result).write_text(json.dumps(answers))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
