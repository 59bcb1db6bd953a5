"""The run's order and its verdicts: the phases in sequence (run, and the verdict sequence in verdicts), the
baseline, self-check and flake re-runs (checks), how many independent reds make a kill (corroboration: the
one policy every re-run asks), outcomes turned into verdicts (judge), which gates run first (order), the layout
probe, the result cache, the coverage map and the details a report shows. The top of the run: may import every
other part.
"""
