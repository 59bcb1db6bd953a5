"""`make bench`'s goals block: each of issue 55's goals with the figure a run measured, met or not, and only
those the run measured (a bench of some sections prints no verdict on the others)."""

from __future__ import annotations

from benchmarks.bench import GOALS, goals


def test_each_measured_goal_is_judged_against_its_limit_and_others_are_left_out() -> None:
    figures = {
        "verify": {"first_kill_over_gates": 1.48, "full_matrix_over_floor": 1.04},
        "changed": {"ratio": 1.32},
        "scale": {"per-mutant overhead 1000 / 10": "not a number"},
    }
    found = goals(figures)
    assert found == {
        "--first-kill / the gates": "1.480 (goal <= 1.3: NOT met)",
        "the full matrix / its floor": "1.040 (goal <= 1.05: met)",
        "--changed-since on one function / its gates": "1.320 (goal <= 1.5: met)",
    }


def test_every_goal_names_a_section_the_bench_runs() -> None:
    from benchmarks.bench import SECTIONS

    assert {section for _, section, _, _ in GOALS} <= set(SECTIONS)
