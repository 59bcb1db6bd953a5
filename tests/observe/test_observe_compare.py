"""The comparison of two observations: the stated float tolerance, the first divergence, digests, scrubbing."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy
import pytest
import torch

from verify.observe.compare import ATOL, RTOL, Comparison, Tolerance, compare
from verify.observe.explain import EQUIVALENT, explain
from verify.observe.record import Observation, Recorder, digest, normalise


def _observation(*entries: tuple[str, int, int, str, object], scrub: tuple[tuple[str, str], ...] = ()) -> Observation:
    recorder = Recorder(scrub)
    for workload, step, row, what, value in entries:
        recorder.workload = workload
        recorder.emit(step, row, what, value)
    return recorder.observation()


LOGITS = torch.tensor([1.0, -2.0, 3.5, 1e-3])


def test_the_stated_tolerance_is_the_default() -> None:
    assert (Tolerance().atol, Tolerance().rtol) == (ATOL, RTOL) == (1e-6, 1e-5)
    assert "1e-06 + 1e-05 x max |pristine| along the last dimension" in str(Tolerance())


@pytest.mark.parametrize(
    ("index", "delta", "equivalent", "moved"),
    [
        (2, 0.0, True, False),  # bit-identical
        (2, 3.5 * 1e-6, True, True),  # inside atol + rtol * max|row| = 3.6e-5: moved bits, within the bound
        (2, 3.5 * 2e-5, False, False),  # past it
        # A value near zero moves by its row's rounding (a reordered sum of terms of size 3.5), not by its own
        # size: 5e-6 at 1e-3 is within; 1e-4 is not.
        (3, 5e-6, True, True),
        (3, 1e-4, False, False),
    ],
    ids=["bit-identical", "within-bound", "past-bound", "near-zero-within", "near-zero-past"],
)
def test_floats_agree_within_the_stated_bound(index: int, delta: float, equivalent: bool, moved: bool) -> None:
    mutant = LOGITS.clone()
    mutant[index] += delta
    comparison = compare(_observation(("w", 0, 0, "logits", LOGITS)), _observation(("w", 0, 0, "logits", mutant)))
    assert comparison.is_equivalent is equivalent
    assert ("logits" in comparison.within_tolerance) is moved
    if not equivalent:
        assert comparison.first is not None and "in 1 of 4 values" in comparison.first.amount


def test_discrete_values_must_be_equal_and_the_first_divergence_comes_first() -> None:
    pristine = _observation(("a", 0, 0, "ids", (1, 2, 3)), ("a", 1, 0, "ids", (4, 5)), ("b", 0, 1, "count", 3))
    mutant = _observation(("a", 0, 0, "ids", (1, 2, 3)), ("a", 1, 0, "ids", (4, 6)), ("b", 0, 1, "count", 4))
    comparison = compare(pristine, mutant)
    assert [(d.workload, d.step, d.what) for d in comparison.divergences] == [("a", 1, "ids"), ("b", 0, "count")]
    assert comparison.first is not None and "item 1: 5 -> 6" in comparison.first.amount
    assert comparison.divergences[1].amount == "by +1"


def test_an_observable_only_one_run_has_diverges_in_place() -> None:
    pristine = _observation(("a", 0, 0, "x", 1), ("a", 1, 0, "x", 2))
    mutant = _observation(("a", 0, 0, "x", 1), ("a", 0, -1, "error", "IndexError: boom"), ("a", 1, 0, "x", 2))
    comparison = compare(pristine, mutant)
    assert comparison.first is not None
    assert (comparison.first.what, comparison.first.amount) == ("error", "absent in the pristine run")
    assert comparison.first.mutant == "'IndexError: boom'"


def test_equal_observations_explain_as_observably_equivalent_with_what_was_compared() -> None:
    one = _observation(("a", 0, 0, "x", LOGITS), ("a", 0, 0, "ids", (1, 2)))
    explanation = explain("m", compare(one, one), {})
    assert explanation.is_equivalent and explanation.summary().startswith(EQUIVALENT)
    assert "compared: x, ids" in explanation.text()


def test_hidden_by_the_verify_when_the_outputs_stay_equal() -> None:
    pristine = _observation(("a", 0, 0, "drafted", (1, 2)), ("a", -1, -1, "output tokens", (0, (5, 6), "length")))
    mutant = _observation(("a", 0, 0, "drafted", (1, 3)), ("a", -1, -1, "output tokens", (0, (5, 6), "length")))
    explanation = explain("m", compare(pristine, mutant), {"drafted": "assert_same_drafts"})
    assert explanation.hidden_by_verify
    assert "hidden by the verify" in explanation.summary()
    assert explanation.gate == "assert_same_drafts, on the workload 'a' (the observer's mapping, not measured)"
    assert explanation.equal == ("output tokens",)


def _greedy_and_sampled(sampled_token: int) -> Observation:
    """A greedy workload that records `output tokens` and a sampled one that names its tokens otherwise (as
    docs/how-to/observe.md asks): only the sampled workload's bonus token depends on `sampled_token`."""
    return _observation(
        ("greedy", 0, 0, "drafted", (1, 2)),
        ("greedy", -1, 0, "output tokens", (5, 6)),
        ("sampled", 3, 0, "target input", (sampled_token, 2)),
        ("sampled", -1, 0, "sampled tokens", (sampled_token, 7)),
    )


def test_a_divergence_only_where_no_output_is_recorded_is_not_hidden_by_the_verify() -> None:
    """An outside engine's bonus token drawn from the wrong row changes only its sampled workload, which
    records no `output tokens`: equal greedy outputs said nothing of it, yet it read "hidden by the verify"."""
    comparison = Comparison.from_data(
        json.loads(json.dumps(compare(_greedy_and_sampled(11), _greedy_and_sampled(9)).to_data()))
    )
    explanation = explain("bonus-off-by-one", comparison, {})
    assert explanation.first is not None and explanation.first.workload == "sampled"
    assert explanation.output_workloads == ("greedy",)
    assert not explanation.hidden_by_verify
    assert "hidden by the verify" not in explanation.summary()
    assert "but the workload 'sampled', where it first diverges, records none" in explanation.text()


def test_hidden_by_the_verify_names_the_workloads_that_record_outputs() -> None:
    pristine = _greedy_and_sampled(11)
    mutant = _observation(
        ("greedy", 0, 0, "drafted", (1, 3)),
        ("greedy", -1, 0, "output tokens", (5, 6)),
        ("sampled", 3, 0, "target input", (9, 2)),
        ("sampled", -1, 0, "sampled tokens", (9, 7)),
    )
    explanation = explain("drafter-context", compare(pristine, mutant), {})
    assert explanation.hidden_by_verify and "hidden by the verify" in explanation.summary()
    assert "equal on every workload that records them (greedy): the loss is hidden by the verify there" in (
        explanation.text()
    )
    # a comparison from before `recorded` was kept claims as it did
    older = {**compare(pristine, mutant).to_data()}
    del older["recorded"]
    assert explain("drafter-context", Comparison.from_data(older), {}).hidden_by_verify


def test_digests_tell_identical_observations_apart_from_different_ones() -> None:
    a = _observation(("a", 0, 0, "x", LOGITS), ("a", 0, 0, "ids", [1, 2]))
    b = _observation(("a", 0, 0, "x", LOGITS.clone()), ("a", 0, 0, "ids", (1, 2)))
    c = _observation(("a", 0, 0, "x", LOGITS + 1e-7), ("a", 0, 0, "ids", (1, 2)))
    assert digest(a) == digest(b) != digest(c)


def test_values_are_normalised_and_private_paths_scrubbed() -> None:
    assert normalise(torch.tensor([[1, 2], [3, 4]])) == ((1, 2), (3, 4))
    assert normalise({"a": [1, torch.tensor(2)]}) == (("a", (1, 2)),)
    assert normalise(numpy.arange(4).reshape(2, 2)) == ((0, 1), (2, 3))
    assert isinstance(normalise(numpy.ones(2, dtype=numpy.float32)), torch.Tensor)
    scrubbed = normalise("no file /tmp/x1/fx/config.json at 0x7f00deadbeef", (("/tmp/x1", "<tmp>"),))
    assert scrubbed == "no file <tmp>/fx/config.json at 0x..."


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True])
def test_a_bad_tolerance_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="atol"):
        Tolerance(atol=bad)


@dataclass
class _Slot:
    row: int
    pages: list[int]


@pytest.mark.parametrize(
    ("pristine", "mutant"),
    [
        (torch.arange(6).reshape(2, 3), torch.arange(6).reshape(3, 2)),  # same ids, another shape
        (torch.zeros(0, dtype=torch.long), torch.zeros(4, 0, dtype=torch.long)),  # empty, but not alike
        ({1: "a"}, {"1": "a"}),  # a key's type
        (_Slot(0, [1, 2]), _Slot(0, [1, 3])),  # a dataclass's field, not its repr's address
        (numpy.arange(2000), numpy.arange(2000) * (numpy.arange(2000) != 1000)),  # numpy's repr cuts the middle
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0])),  # NaN is not a number
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("nan")])),
        (torch.tensor([float("inf")]), torch.tensor([-float("inf")])),
        (torch.tensor([1 + 1j]), torch.tensor([1 - 1j])),  # the imaginary part counts
        (torch.ones(3, dtype=torch.bfloat16), torch.full((3,), 2.0, dtype=torch.bfloat16)),  # numpy has no bf16
    ],
    ids=[
        "int-shape",
        "empty-shape",
        "key-type",
        "dataclass",
        "numpy",
        "nan-pristine",
        "nan-mutant",
        "inf-sign",
        "complex",
        "bfloat16",
    ],
)
def test_every_difference_of_value_or_shape_diverges(pristine: object, mutant: object) -> None:
    a, b = _observation(("w", 0, 0, "v", pristine)), _observation(("w", 0, 0, "v", mutant))
    assert not compare(a, b).is_equivalent
    assert digest(a) != digest(b)
    assert compare(a, _observation(("w", 0, 0, "v", pristine))).is_equivalent  # and each equals itself
    assert digest(a) == digest(_observation(("w", 0, 0, "v", pristine)))


def test_an_observation_and_its_comparison_cross_processes_as_json_bit_for_bit() -> None:
    from verify.observe.record import from_data, to_data

    recorder = Recorder(workload="w")
    recorder.emit(0, 0, "logits", torch.tensor([[1.5, float("nan")], [float("inf"), -0.0]]))
    recorder.emit(0, 1, "half", torch.tensor([0.1, 2.0], dtype=torch.bfloat16))
    recorder.emit(1, -1, "complex", torch.tensor([1 + 2j], dtype=torch.complex64))
    recorder.emit(1, -1, "ids", torch.tensor([[3, 4]]))
    recorder.emit(-1, -1, "misc", {"a": None, "b": (True, 2.5, "s")})
    observation = recorder.observation()
    back = from_data(json.loads(json.dumps(to_data(observation))))
    assert digest(back) == digest(observation)  # every key and value, bit for bit
    mutant = Recorder(workload="w")
    mutant.emit(0, 0, "logits", torch.tensor([[1.5, float("nan")], [float("inf"), 1.0]]))
    comparison = compare(observation, mutant.observation())
    assert Comparison.from_data(json.loads(json.dumps(comparison.to_data()))) == comparison
    # Data a child wrote is checked, never trusted: anything but the shapes above is refused by name.
    for bad in ({"not": "a list"}, [[["w", 0, 0, "x"], {"dtype": "torch.int64", "shape": [1], "bytes": ""}]]):
        with pytest.raises(ValueError):
            from_data(bad)
