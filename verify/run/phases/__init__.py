"""The run's order and its verdicts: the phases in sequence (run), the baseline, self-check and flake re-runs
(checks), outcomes turned into verdicts (judge), which gates run first (order), the layout probe, the result
cache, the coverage map and the details a report shows. The top of the run: may import every other part.
"""
