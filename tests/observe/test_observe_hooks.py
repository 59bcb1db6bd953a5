"""The runner observer's hooks name the engine signatures they rely on: a refactor that renames or reorders one
is a HookContractError naming the function (harness trouble), never an "error" observable blamed on the engine;
arguments are read by name, so a caller passing them by keyword is observed the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import runner.engine as engine_module
from runner import Engine, EngineConfig, SamplingParams
from verify.observe.protocol import observe
from verify.observe.runner_hooks import CONTRACTS, HookContractError, check_contracts, watch

FIXTURE = Path(__file__).parents[2] / "runner" / "fixtures" / "stride-dflash"


@pytest.fixture
def engine() -> Engine:
    return Engine.from_pretrained(FIXTURE / "target", FIXTURE / "draft", config=EngineConfig(trace=True))


def test_the_runner_meets_every_contract(engine: Engine) -> None:
    check_contracts(engine)
    assert set(CONTRACTS) == {
        "runner.engine.propose",
        "runner.engine.greedy_accept_counts",
        "runner.engine.rejection_accept",
        "engine.draft.logits",
        "engine.target.forward",
    }


def test_a_renamed_parameter_is_a_named_contract_error(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    original = engine_module.greedy_accept_counts

    def renamed(drafted: Any, argmax: Any, num_valid: Any) -> Any:  # `target_argmax` renamed by a refactor
        return original(drafted, argmax, num_valid)

    monkeypatch.setattr(engine_module, "greedy_accept_counts", renamed)
    with pytest.raises(HookContractError, match=r"runner\.engine\.greedy_accept_counts takes \(drafted, argmax"):
        check_contracts(engine)
    with pytest.raises(HookContractError), watch(engine, lambda *a: None):
        pass
    assert engine_module.greedy_accept_counts is renamed  # nothing was wrapped before the check refused


def test_a_broken_contract_escapes_the_observation_as_harness_trouble(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine.draft, "logits", lambda h, head: None)  # parameters renamed

    class Observer:
        workloads = ("greedy",)

        def run(self, workload: str, emit: Any) -> None:
            with watch(engine, emit):
                engine.generate([[3, 6, 9]], SamplingParams(max_tokens=4))

    with pytest.raises(HookContractError, match=r"engine\.draft\.logits"):
        observe(Observer())


def test_keyword_calls_are_observed_like_positional_ones(engine: Engine) -> None:
    seen: list[tuple[str, Any]] = []
    drafted, p = torch.tensor([1]), torch.full((2, 8), 1 / 8)
    q, generator = torch.full((1, 8), 1 / 8), torch.Generator().manual_seed(0)
    with watch(engine, lambda step, row, what, value: seen.append((what, value))):
        # the wrapped rule, called with every argument by keyword (a refactored caller's spelling)
        engine_module.rejection_accept(
            drafted=drafted, target_probs=p, draft_probs=q, draft_indices=None, generator=generator
        )
    assert [what for what, _ in seen] == ["rule drafted", "rule p", "rule q", "rule accepted", "rule next token"]
    assert seen[1][1] is p and seen[2][1] is q
