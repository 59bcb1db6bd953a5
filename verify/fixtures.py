"""Shipped fixture pairs: their recipes, building them reproducibly, their manifests, and auditing them.

A fixture lives in runner/fixtures/NAME/ as `target/` and `draft/` HF folders plus `manifest.json` (seed,
recipe and its version, file hashes, audit prompts, the audit's figures at build time, and the floors the
gates hold the fixture to). Building writes into a temporary folder and moves it into place only after the
audit passed, so a failed build leaves the shipped fixture as it was.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

import runner
from runner.fixture_recipe import RECIPE_VERSION, StrideRecipe, build, sample_copy_sequences
from runner.loader import save_draft, save_target
from verify.audit import AuditReport, audit

FIXTURES_ROOT = Path(runner.__file__).resolve().parent / "fixtures"
AUDIT_MAX_TOKENS = 24
COPY = StrideRecipe(language="copy", period=20, rope_theta=100.0, seq_len=56, target_steps=500, draft_steps=500)
RECIPES: dict[str, StrideRecipe] = {
    # The default pair: drafted blocks held far back in the draft's store.
    "copy-dflash": COPY,
    "copy-dflash2": dataclasses.replace(COPY, kind="dflash2", selector_scale=3.0),
    "stride-dflash": StrideRecipe(),
    "stride-dflash2": StrideRecipe(kind="dflash2", selector_scale=3.0),
}
DEFAULT_FIXTURE = "copy-dflash"


class FixtureError(RuntimeError):
    """An unknown fixture, a missing manifest, or a build whose audit failed."""


@dataclass(frozen=True, slots=True)
class BuildResult:
    path: Path
    report: AuditReport
    manifest: dict


def audit_prompts(recipe: StrideRecipe, count: int = 10) -> list[list[int]]:
    """Fixed prompts from a seed apart from training's. Stride: every stride class equally often, random
    starts, lengths 8..12 (spreading the strides keeps two prompts from walking the same progression). Copy: a
    random segment and the first 1..5 tokens of its repeat, so every drafted block is a copy."""
    generator = torch.Generator().manual_seed(recipe.seed + 10_000)
    if recipe.language == "copy":
        seqs = sample_copy_sequences(recipe, count, generator)
        return [seqs[i, : recipe.period + 1 + i % 5].tolist() for i in range(count)]
    starts = torch.randint(0, recipe.num_symbols, (count,), generator=generator).tolist()
    prompts = []
    for i, start in enumerate(starts):
        stride = 1 + i % recipe.max_stride
        prompts.append([(start + k * stride) % recipe.num_symbols for k in range(8 + i % 5)])
    return prompts


def file_hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def resolve(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.is_dir() and (path / "target").is_dir():
        return path
    if (FIXTURES_ROOT / name_or_path / "target").is_dir():
        return FIXTURES_ROOT / name_or_path
    raise FixtureError(f"no fixture {name_or_path!r} (known: {sorted(RECIPES)}; or give a folder with target/ draft/)")


def read_manifest(folder: Path) -> dict:
    path = folder / "manifest.json"
    if not path.is_file():
        raise FixtureError(f"{folder}: no manifest.json")
    return json.loads(path.read_text())


def audit_profile(recipe: dict) -> str:
    """The copy language's fixtures are held to what their store carries; the rest to the base bounds."""
    return "store" if recipe.get("language") == "copy" else "base"


def audit_fixture(name_or_path: str) -> AuditReport:
    folder = resolve(name_or_path)
    manifest = read_manifest(folder)
    max_tokens = manifest.get("audit_max_tokens", AUDIT_MAX_TOKENS)
    return audit(folder, manifest["audit_prompts"], max_tokens, audit_profile(manifest.get("recipe", {})))


def build_fixture(name: str, seed: int | None = None, out_root: Path | None = None) -> BuildResult:
    if name not in RECIPES:
        raise FixtureError(f"unknown fixture {name!r}; known: {sorted(RECIPES)}")
    recipe = RECIPES[name] if seed is None else dataclasses.replace(RECIPES[name], seed=seed)
    destination = (out_root or FIXTURES_ROOT) / name
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / name
        torch.set_num_threads(1)  # reproducible: the recipe's figures were measured single-threaded
        target, draft = build(recipe)
        save_target(target, staging / "target")
        save_draft(draft, staging / "draft")
        prompts = audit_prompts(recipe)
        report = audit(staging, prompts, AUDIT_MAX_TOKENS, audit_profile(dataclasses.asdict(recipe)))
        if not report.passed:
            failed = ", ".join(f"{f.name}={f.value:.3f} ({f.threshold.text})" for f in report.failed)
            raise FixtureError(f"fixture {name!r} built but failed its audit: {failed}")
        manifest = {
            "name": name,
            "recipe_version": RECIPE_VERSION,
            "recipe": dataclasses.asdict(recipe),
            "seed": recipe.seed,
            "torch": torch.__version__,
            "files": file_hashes(staging),
            "audit_prompts": prompts,
            "audit_max_tokens": AUDIT_MAX_TOKENS,
            "audit_profile": audit_profile(dataclasses.asdict(recipe)),
            "audit": report.to_dict(),
            # Gates hold the shipped fixture to 90% of the acceptance measured at build time.
            "gate_floors": {"acceptance_mean": round(0.9 * report.value("acceptance_right"), 3)},
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if destination.exists():
            shutil.rmtree(destination)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, destination)
    return BuildResult(destination, report, manifest)
