"""The refusal workload: bad input fed to the embedded runner, and what it answers (a named error and its
message, another exception, or acceptance). Broken checkpoints are built in a temporary copy of a fixture;
the fixture itself is never written. Knows nothing of mutations or comparisons.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["observe_refusals", "scratch"]


@contextlib.contextmanager
def scratch(name: str) -> Iterator[Path]:
    """A fresh folder of a fixed name under the temporary directory: a random name would show in the messages
    that quote its paths, and two runs of the same tree must observe the same text."""
    folder = Path(tempfile.gettempdir()) / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except Exception as error:  # which exception, and its message, is the observable
        return f"{type(error).__name__}: {error}"
    return "accepted"


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _set(cfg: dict[str, Any], key: str, value: object) -> None:
    cfg[key] = value


def _broken_checkpoints(fixture: Path, tmp: Path) -> dict[str, tuple[Path, Path]]:
    """name -> (target folder, draft folder), one of them a copy of the fixture's broken one way."""
    from safetensors.torch import load_file, save_file

    def copy(name: str, part: str) -> Path:
        folder = tmp / name / part
        shutil.copytree(fixture / part, folder)
        return folder

    def edit_weights(folder: Path, edit: Callable[[dict[str, Any]], None]) -> None:
        path = folder / "model.safetensors"
        weights = load_file(str(path))
        edit(weights)
        save_file(weights, str(path))

    target, draft = fixture / "target", fixture / "draft"
    broken = {}
    folder = copy("malformed", "target")
    (folder / "config.json").write_text("{not json")
    broken["malformed config.json"] = (folder, draft)
    for key, value in (("hidden_size", "64"), ("num_hidden_layers", 2.0), ("vocab_size", True)):
        folder = copy(f"typed-{key}", "target")
        _edit_json(folder / "config.json", functools.partial(_set, key=key, value=value))
        broken[f"config {key} = {value!r}"] = (folder, draft)
    folder = copy("missing", "target")
    edit_weights(folder, lambda w: w.pop("model.layers.0.self_attn.k_norm.weight"))
    broken["target tensor missing"] = (folder, draft)
    folder = copy("nan", "target")
    edit_weights(folder, lambda w: w["model.norm.weight"].__setitem__(3, float("nan")))
    broken["target weight not finite"] = (folder, draft)
    folder = copy("shape", "draft")
    edit_weights(folder, lambda w: w.update({"fc.weight": w["fc.weight"][:, :-1].contiguous()}))
    broken["draft fc.weight one column short"] = (target, folder)
    folder = copy("layers", "draft")
    _edit_json(folder / "config.json", lambda cfg: cfg["dflash_config"].update(target_layer_ids=[0, 7]))
    broken["draft target_layer_ids [0, 7]"] = (target, folder)
    folder = copy("mask", "draft")
    _edit_json(folder / "config.json", lambda cfg: cfg["dflash_config"].update(mask_token_id=10**6))
    broken["draft mask_token_id past the vocab"] = (target, folder)
    return broken


def observe_refusals(fixture: Path, emit: Callable[[int, int, str, Any], None]) -> None:
    import runner

    # Typed as Any: feeding them wrong types is the point of this workload.
    engine_config: Any = runner.EngineConfig
    sampling: Any = runner.SamplingParams
    for name in ("max_num_seqs", "page_size", "num_pages"):
        for value in (0, -1, 1.5, True):
            call = functools.partial(engine_config, **{name: value})
            emit(-1, -1, "refused", (f"EngineConfig({name}={value!r})", _outcome(call)))
    for changes in (
        {"max_tokens": 0}, {"temperature": -1.0}, {"temperature": 1e-5}, {"temperature": float("nan")},
        {"top_p": 0.0}, {"top_p": 1.5}, {"top_k": -1}, {"stop_token_ids": "7"}, {"stop_token_ids": (-1,)},
        {"seed": -1}, {"seed": 2**64}, {"ignore_eos": 1}, {"temperature": 1e-4}, {"top_p": 1e-300},
    ):  # fmt: skip
        emit(-1, -1, "refused", (f"SamplingParams({changes})", _outcome(functools.partial(sampling, **changes))))
    engine: Any = runner.Engine.from_pretrained(
        fixture / "target", fixture / "draft", config=runner.EngineConfig(num_pages=8)
    )
    vocab = engine.target.config.vocab_size
    requests: list[tuple[str, list[Any], Any]] = [
        ("empty prompt", [], sampling()),
        ("id past the vocab", [1, vocab], sampling()),
        ("negative id", [1, -1], sampling()),
        ("not ints", [1, "2"], sampling()),
        ("longer than the pool", [1, 2, 3], sampling(max_tokens=10**4)),
    ]
    for what, prompt, params in requests:
        emit(-1, -1, "refused", (what, _outcome(functools.partial(engine.add_request, prompt, params))))
    emit(-1, -1, "refused", ("bad params type", _outcome(functools.partial(engine.generate, [[1, 2]], "greedy"))))
    with scratch("dflash-observe-refusals") as tmp:
        for name, (target, draft) in _broken_checkpoints(fixture, tmp).items():
            load = functools.partial(runner.Engine.from_pretrained, target, draft)
            emit(-1, -1, "refused", (name, _outcome(load)))
