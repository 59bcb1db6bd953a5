"""`make bench`: the runner's speed on the shipped fixture, against the reference, and the verify tool's speed
against one baseline run of its gates and against the naive way at equal parallelism (benchmarks/verify_bench.py).
Everything is measured in one run and printed as a table plus JSON (reports/bench.json).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.verify_bench import bench_verify
from runner import Engine, EngineConfig, SamplingParams
from verify.fixtures.catalog import FIXTURES_ROOT, read_manifest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = FIXTURES_ROOT / "stride-dflash"
MAX_TOKENS = 64


def _prompts(count: int) -> list[list[int]]:
    base = read_manifest(FIXTURE)["audit_prompts"]
    return [base[i % len(base)] for i in range(count)]


def _tokens_per_s(engine: Engine, prompts: list[list[int]], repeats: int = 3) -> tuple[float, list]:
    params = SamplingParams(max_tokens=MAX_TOKENS)
    engine.generate(prompts[:1], params)  # warm-up
    best, outs = 0.0, []
    for _ in range(repeats):
        start = time.perf_counter()
        outs = engine.generate(prompts, params)
        elapsed = time.perf_counter() - start
        best = max(best, sum(len(o.token_ids) for o in outs) / elapsed)
    return best, outs


def bench_runner() -> dict:
    figures: dict = {}
    plain = Engine.from_pretrained(FIXTURE / "target")
    figures["plain_batch1_tok_s"], _ = _tokens_per_s(plain, _prompts(1))
    for batch in (1, 4, 16):
        spec = Engine.from_pretrained(FIXTURE / "target", FIXTURE / "draft", config=EngineConfig(max_num_seqs=16))
        figures[f"spec_batch{batch}_tok_s"], outs = _tokens_per_s(spec, _prompts(batch))
        if batch == 16:
            figures["mean_acceptance"] = statistics.fmean(a for o in outs for a in o.acceptance_lengths)
    figures.update(bench_reference())
    return figures


def bench_reference() -> dict:
    """Our batch-1 time against dflash_generate's on the same weights and prompts (CPU, float32)."""
    ref_path = os.environ.get("DFLASH_REFERENCE_PATH", str(ROOT / ".cache" / "ref"))
    sys.path.insert(0, ref_path)
    import dflash.model as ref  # the optional oracle, installed beside the venv
    from transformers import Qwen3ForCausalLM

    ref._cuda_time = time.perf_counter  # the reference synchronises CUDA when timing
    target = Qwen3ForCausalLM.from_pretrained(FIXTURE / "target", dtype=torch.float32).eval()
    draft = ref.DFlashDraftModel.from_pretrained(FIXTURE / "draft", dtype=torch.float32).eval()
    ours = Engine.from_pretrained(FIXTURE / "target", FIXTURE / "draft")
    prompts = _prompts(8)
    params = SamplingParams(max_tokens=MAX_TOKENS)
    ours.generate(prompts[:1], params)
    ref.dflash_generate(draft, target, torch.tensor([prompts[0]]), MAX_TOKENS, None)
    start = time.perf_counter()
    for p in prompts:
        ours.generate([p], params)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    ref_ids = [
        ref.dflash_generate(draft, target, torch.tensor([p]), MAX_TOKENS, None)[0, len(p) :].tolist() for p in prompts
    ]
    ref_s = time.perf_counter() - start
    same = all(r == list(ours.generate([p], params)[0].token_ids) for r, p in zip(ref_ids, prompts, strict=True))
    return {
        "ours_batch1_s": ours_s,
        "reference_batch1_s": ref_s,
        "ours_over_reference": ours_s / ref_s,
        "reference_same_tokens": same,
    }


def main() -> None:
    torch.set_num_threads(1)
    figures = {"runner": bench_runner(), "verify": bench_verify()}
    Path(ROOT / "reports").mkdir(exist_ok=True)
    (ROOT / "reports" / "bench.json").write_text(json.dumps(figures, indent=2) + "\n")
    for section, values in figures.items():
        print(f"[{section}]")
        for key, value in values.items():
            print(f"  {key:34s} {value:.3f}" if isinstance(value, float) else f"  {key:34s} {value}")


if __name__ == "__main__":
    main()
