"""The model sizes `make bench` times our batch-1 runner on against the reference: the shipped stride-dflash
fixture (trained, high acceptance) and random-initialised pairs of other shapes, built by the project's own
pair builder (verify.fixtures.synthetic) into `.cache/bench-sizes/` on first use and reused after.

Each added size moves one part of the runner's cost profile away from the fixture's: a smaller model (per-op
overhead only), a deep one (per-layer overhead), a wide one with a large vocab (matmuls and the LM head), and a
high-GQA one with a long block and a deeper draft (attention, the draft's share). A random draft rarely guesses
its random target, so those sizes accept about one token a step: every step drafts and verifies a whole block,
the costliest profile per token. Larger sizes run fewer prompts and rounds so the section stays a few minutes.
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

from verify.fixtures.catalog import FIXTURES_ROOT, read_manifest
from verify.fixtures.synthetic import PairSpec, write_pair

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench-sizes"


@dataclass(frozen=True, slots=True)
class BenchSize:
    """One size of the batch-1 comparison: a pair spec to build (None: the shipped fixture), and how much of it
    to time (prompts per round, paired rounds)."""

    name: str
    spec: PairSpec | None
    num_prompts: int = 8
    rounds: int = 9
    prompt_len: int = 10

    def __post_init__(self) -> None:
        if self.num_prompts < 1 or self.rounds < 1 or self.prompt_len < 1:
            raise ValueError(f"bench size {self.name!r}: prompts, rounds and prompt length must be positive")

    def describe(self) -> str:
        s = self.spec
        if s is None:
            return "stride-dflash fixture: hidden 64, 2+2 layers, 4/2 heads x 16, vocab 48, block 4"
        return (
            f"hidden {s.hidden_size}, {s.num_target_layers}+{s.num_draft_layers} layers, "
            f"{s.num_attention_heads}/{s.num_key_value_heads} heads x {s.head_dim}, vocab {s.vocab_size}, "
            f"block {s.block_size}"
        )


SIZES: tuple[BenchSize, ...] = (
    BenchSize("fixture", None),
    BenchSize(
        "small",
        PairSpec(
            vocab_size=32,
            hidden_size=32,
            intermediate_size=64,
            num_target_layers=2,
            num_draft_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            block_size=4,
            target_layer_ids=(0, 1),
            seed=1,
        ),
    ),
    BenchSize(
        "deep",
        PairSpec(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=192,
            num_target_layers=12,
            num_draft_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            block_size=4,
            target_layer_ids=(1, 5, 9),
            seed=2,
        ),
        num_prompts=4,
        rounds=7,
    ),
    BenchSize(
        "wide",
        PairSpec(
            vocab_size=4096,
            hidden_size=512,
            intermediate_size=1536,
            num_target_layers=4,
            num_draft_layers=2,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=64,
            block_size=8,
            target_layer_ids=(1, 2),
            seed=3,
            init_std=0.05,
        ),
        num_prompts=2,
        rounds=5,
    ),
    BenchSize(
        "gqa",
        PairSpec(
            vocab_size=1024,
            hidden_size=256,
            intermediate_size=768,
            num_target_layers=6,
            num_draft_layers=3,
            num_attention_heads=16,
            num_key_value_heads=2,
            head_dim=32,
            block_size=16,
            target_layer_ids=(1, 3, 4),
            seed=4,
            init_std=0.07,
        ),
        num_prompts=2,
        rounds=5,
    ),
)


def spec_key(spec: PairSpec) -> str:
    """The cache folder's name for a spec: a digest of every field, so a changed spec is built afresh."""
    raw = json.dumps(dataclasses.asdict(spec), sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def checkpoint(size: BenchSize, cache: Path = CACHE) -> Path:
    """The size's folder with `target/` and `draft/` HF checkpoints; built once into the cache (through a
    temporary folder moved into place, so an interrupted build leaves nothing half-written)."""
    if size.spec is None:
        return FIXTURES_ROOT / "stride-dflash"
    folder = cache / f"{size.name}-{spec_key(size.spec)}"
    if (folder / "target" / "config.json").is_file() and (folder / "draft" / "config.json").is_file():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        write_pair(tmp, size.spec)
        if folder.exists():
            shutil.rmtree(folder)
        Path(tmp).rename(folder)
        Path(tmp).mkdir()  # for TemporaryDirectory's own cleanup
    return folder


def prompts(size: BenchSize, folder: Path) -> list[list[int]]:
    """The fixture's audit prompts, or fixed random ids for a random pair (its last id is the draft's MASK)."""
    if size.spec is None:
        base = read_manifest(folder)["audit_prompts"]
        return [base[i % len(base)] for i in range(size.num_prompts)]
    generator = torch.Generator().manual_seed(size.spec.seed + 10_000)
    ids = torch.randint(0, size.spec.vocab_size - 1, (size.num_prompts, size.prompt_len), generator=generator)
    return ids.tolist()
