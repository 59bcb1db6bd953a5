"""The CI recipe runs: examples/ci's GitHub workflow lints clean, and its dflash commands and GitLab's, run as
written on a git copy of the toy project, give a pull request's survivors on their lines and nightly shards
that merge into exactly the whole run.

The commands are read from the recipes themselves (a step's `run` with its `env`, a job's `script`), with the
CI system's variables set as it would set them, so the recipe and its test cannot drift apart. The toy's
catalog is cut to five cheap mutations (a kill, a survivor in each file, one no gate reaches, a stale one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from verify.cli.reporting import repository_prefix
from verify.report.json_report import read_json

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "examples" / "ci" / "github" / "dflash.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"
TOY = Path(__file__).parents[1] / "toy_project"
BIN = Path(sys.executable).parent  # the venv's bin: dflash and actionlint
CATALOG = '''"""A cheap slice of the toy catalog for the CI recipe's test."""

from verify.mutation import Mutation, register

register(
    Mutation("add-off-by-one", "off-by-one in a sum", "toy/arith.py", "return a + b", "return a + b + 1"),
    Mutation("sub-swaps-operands", "operands swapped", "toy/arith.py", "return a - b", "return b - a"),
    Mutation("orphan-unreached", "code no gate reaches", "toy/arith.py", "return a % 7", "return a % 8"),
    Mutation("describe-label", "wrong label", "toy/text.py", '"value"', '"valu"'),
    Mutation("stale-twice", "anchor matches twice", "toy/text.py", "return result", "return None"),
)
'''
ANNOTATION = re.compile(r"^::(warning|error) file=([^,]+)(?:,line=(\d+),endLine=\d+)?,title=[^:]+%3A ([\w-]+)::")
GIT = ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", "-c", "commit.gpgsign=false"]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The engine's repository: the cut toy on `main`, a bare clone standing for the CI system's remote."""
    work = tmp_path_factory.mktemp("ci") / "work"
    shutil.copytree(TOY, work, ignore=shutil.ignore_patterns("__pycache__", ".dflash-cache"))
    (work / "toy_mutations.py").write_text(CATALOG)
    (work / ".gitignore").write_text(".dflash-cache/\nreports/\nshards/\n")
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", ".")
    _git(work, "commit", "-qm", "toy")
    remote = work.parent / "remote.git"
    _git(work.parent, "clone", "-q", "--bare", str(work), str(remote))
    return remote


def _checkout(upstream: Path, dest: Path) -> Path:
    _git(upstream.parent, "clone", "-q", str(upstream), str(dest))
    return dest


def _env(values: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1", **values}


def _expand(value: object, context: dict[str, str]) -> str:
    """A step's `${{ expr }}` as GitHub would fill it from `context` (an unknown expression fails the test)."""
    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: context[m.group(1)], str(value))


def _github_step(job: str, context: dict[str, str]) -> tuple[str, dict[str, str]]:
    (step,) = [s for s in yaml.safe_load(GITHUB.read_text())["jobs"][job]["steps"] if "dflash " in s.get("run", "")]
    assert "${{" not in step["run"]  # expressions go through env, never into the script (script injection)
    return step["run"], {key: _expand(value, context) for key, value in step.get("env", {}).items()}


def _gitlab_script(job: str) -> str:
    return "\n".join(yaml.safe_load(GITLAB.read_text())[job]["script"])


def _start(script: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    # GitHub runs a step's script as `bash --noprofile --norc -eo pipefail`; GitLab's lines stop at the first error.
    return subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd, env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _run(script: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    process = _start(script, cwd, env)
    output, _ = process.communicate(timeout=600)  # a guard against a hang, not a speed check
    return process.returncode, output


def _annotations(output: str) -> dict[str, tuple[str, str, int]]:
    found = {}
    for line in output.splitlines():
        if match := ANNOTATION.match(line):
            level, path, number, name = match.groups()
            found[name] = (level, path, int(number or 0))
    return found


def _anchor_line(tree: Path, file: str, anchor: str) -> int:
    source = (tree / file).read_text()
    return source.count("\n", 0, source.index(anchor)) + 1


def test_the_github_workflow_lints_clean() -> None:
    actionlint = BIN / "actionlint"
    assert actionlint.is_file(), f"no {actionlint}: `make install` installs actionlint with the dev extra"
    done = subprocess.run([str(actionlint), str(GITHUB)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_pull_request_gets_its_survivors_on_their_lines(upstream: Path, tmp_path: Path) -> None:
    tree = _checkout(upstream, tmp_path / "pr")
    _git(tree, "checkout", "-q", "-b", "feature")
    text = tree / "toy" / "text.py"
    text.write_text(text.read_text().replace('    label = "value"', '    # the label a user sees\n    label = "value"'))
    _git(tree, "commit", "-qam", "describe: a comment")
    line = _anchor_line(tree, "toy/text.py", '"value"')

    script, env = _github_step("changed", {"github.base_ref": "main"})
    code, output = _run(script, tree, env)
    assert code == 1, output  # a survivor fails the pull request
    # Only text.py changed: its survivor on the anchor's line, its stale mutation on the file; nothing of arith.py.
    assert _annotations(output) == {
        "describe-label": ("warning", "toy/text.py", line),
        "stale-twice": ("error", "toy/text.py", 0),
    }, output
    assert (tree / "reports" / "dflash.html").is_file() and (tree / "reports" / "dflash.xml").is_file()

    code, output = _run(_gitlab_script("dflash-changed"), tree, {"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"})
    assert code == 1, output
    issues = json.loads((tree / "reports" / "codequality.json").read_text())
    placed = {(i["location"]["path"], i["location"]["lines"]["begin"], i["check_name"]) for i in issues}
    assert placed == {("toy/text.py", line, "dflash-Survived"), ("toy/text.py", 1, "dflash-CompileError")}


def _statuses(path: Path) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    report, _ = read_json(path)
    return {r.name: (str(r.status), r.killed_by, r.ran) for r in report.mutations}


def test_nightly_shards_merge_into_the_whole_run(upstream: Path, tmp_path: Path) -> None:
    whole = _checkout(upstream, tmp_path / "whole")
    code, output = _run("dflash verify --json whole.json --annotations github --codequality whole-cq.json", whole, {})
    assert code == 1, output
    expected_annotations = _annotations(output)
    assert expected_annotations["orphan-unreached"] == (
        "warning", "toy/arith.py", _anchor_line(whole, "toy/arith.py", "return a % 7"),
    )  # fmt: skip

    # GitHub: each shard on its own fresh checkout, at once, as a job matrix runs them; then the merge job.
    shards = [_checkout(upstream, tmp_path / f"shard-{k}") for k in (1, 2)]
    script, _ = _github_step("shard", {"matrix.shard": "1", "strategy.job-total": "2"})  # the same for each
    running = [
        _start(script, tree, _github_step("shard", {"matrix.shard": str(k), "strategy.job-total": "2"})[1])
        for k, tree in enumerate(shards, 1)
    ]
    for process in running:
        output, _ = process.communicate(timeout=600)
        assert process.returncode in (0, 1), output  # a verdict, whichever
    merged = shards[0]  # the merge job downloads every shard's artifact into shards/
    shutil.copy(shards[1] / "shards" / "shard-2.json", merged / "shards")
    script, env = _github_step("merge", {})
    code, output = _run(script, merged, env)
    assert code == 1, output
    assert _statuses(merged / "reports" / "dflash.json") == _statuses(whole / "whole.json")
    assert _annotations(output) == expected_annotations
    whole_data = json.loads((whole / "whole.json").read_text())
    merged_data = json.loads((merged / "reports" / "dflash.json").read_text())
    assert merged_data["verdict"] == whole_data["verdict"]

    # GitLab: the same shards by its parallel job's variables (on the same checkouts), then its merge job.
    script = _gitlab_script("dflash-shard")
    running = [
        _start(script, tree, {"CI_NODE_INDEX": str(k), "CI_NODE_TOTAL": "2"}) for k, tree in enumerate(shards, 1)
    ]
    for process in running:
        output, _ = process.communicate(timeout=600)
        assert process.returncode in (0, 1), output
    shutil.copy(shards[1] / "shards" / "shard-2.json", merged / "shards")
    code, output = _run(_gitlab_script("dflash-merge"), merged, {})
    assert code == 1, output
    assert _statuses(merged / "reports" / "dflash.json") == _statuses(whole / "whole.json")
    codequality = json.loads((merged / "reports" / "codequality.json").read_text())
    assert codequality == json.loads((whole / "whole-cq.json").read_text())


def test_annotation_paths_are_relative_to_the_repository_root(tmp_path: Path) -> None:
    engine = tmp_path / "repo" / "engine"
    engine.mkdir(parents=True)
    _git(tmp_path / "repo", "init", "-q")
    assert repository_prefix(engine) == "engine/"
    assert repository_prefix(tmp_path / "repo") == ""
    assert repository_prefix(tmp_path) == ""  # outside git: paths stay relative to the project
