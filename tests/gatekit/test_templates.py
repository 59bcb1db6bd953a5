"""Bug-class templates (verify.templates): every registered template rewrites the anchor it documents into
its documented replacement, yields a Mutation ready to register, and refuses an anchor that does not fit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from verify import templates
from verify.mutation import Mutation, MutationError, all_mutations, register, reset_registry
from verify.templates import TEMPLATES, TemplateError


@pytest.fixture(autouse=True)
def _fresh_registry():
    reset_registry()
    yield
    reset_registry()


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_template_rewrites_its_example_and_is_registered_ready(name: str) -> None:
    template = TEMPLATES[name]
    made = template("engine/accept.py", template.example_anchor)
    assert isinstance(made, Mutation) and made.name == name
    assert made.replacement == template.example_replacement
    assert made.bug_class == template.bug_class and "assert_" in template.killed_by
    register(made)
    assert all_mutations() == {name: made}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_each_template_names_itself_when_the_anchor_does_not_fit(name: str) -> None:
    with pytest.raises(TemplateError, match=f"template {name.replace('-', '_')}: .*(no|exactly one)"):
        TEMPLATES[name]("engine/accept.py", "pass")
    assert issubclass(TemplateError, MutationError)


@pytest.mark.parametrize(
    ("make", "anchor", "replacement"),
    [
        (templates.acceptance_past_first_mismatch, "if d != t:\n            break", "if d != t:\n            continue"),
        (templates.acceptance_past_first_mismatch, "n = torch.cumprod(m, dim=0).sum()", "n = m.sum()"),
        (templates.cache_crop_off_by_one, "k = k[:, :length]", "k = k[:, :length + 1]"),
        (templates.cache_write_shifted, "keys[self.length:end] = k", "keys[self.length + 1:end + 1] = k"),
        (templates.cache_write_shifted, "cache[pos] = kv", "cache[pos + 1] = kv"),
        (templates.bonus_off_by_one, "token = logits[3].argmax()", "token = logits[2].argmax()"),
        (  # numpy's sampler takes the vocabulary's size: `p.shape[1]` is a size, not the bonus row
            templates.bonus_off_by_one,
            "return n, int(rng.choice(p.shape[1], p=p[len(drafts)]))",
            "return n, int(rng.choice(p.shape[1], p=p[len(drafts) - 1]))",
        ),
        (templates.ratio_inverted, "ratio = (p_x / q_x).clamp(max=1)", "ratio = (q_x / p_x).clamp(max=1)"),
        (templates.residual_not_subtracting_draft, "res = torch.clamp(p - q, min=0)", "res = torch.clamp(p, min=0)"),
        (templates.position_offset, "pos = start + offsets", "pos = (start + offsets) + 1"),
        (templates.ratio_inverted, "        ratio = p / q", "        ratio = q / p"),  # copied with its indentation
        (templates.acceptance_past_first_mismatch, "    if d != t:", None),  # a header alone: no break in it
    ],
)
def test_the_rewrite_touches_only_the_construct(make, anchor: str, replacement: str | None) -> None:
    if replacement is None:
        with pytest.raises(TemplateError, match="needs exactly one"):
            make("engine/x.py", anchor, name="a-bug")
    else:
        assert make("engine/x.py", anchor, name="a-bug").replacement == replacement


def test_an_anchor_with_two_candidates_or_no_python_is_refused() -> None:
    with pytest.raises(TemplateError, match="has 2 divisions"):
        templates.ratio_inverted("e.py", "r = a / b / c")
    with pytest.raises(TemplateError, match="does not parse"):
        templates.ratio_inverted("e.py", "r = a / (b")
    with pytest.raises(MutationError, match="must be a Python source file"):
        templates.ratio_inverted("e.txt", "r = a / b")


def test_a_catalog_whose_anchor_does_not_fit_is_exit_2_naming_the_template(tmp_path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("def ratio(p, q):\n    return p / q\n")
    (tmp_path / "bad_catalog.py").write_text(
        "from verify import templates\nfrom verify.mutation import register\n\n"
        'register(templates.ratio_inverted("pkg/__init__.py", "return p * q"))\n'
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.dflash]\nmutation_modules = ["bad_catalog"]\nsource_roots = ["pkg"]\ngates = ["tests"]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "verify", "mutations", "list", "--project", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "template ratio_inverted: the anchor 'return p * q' has no divisions" in done.stderr
