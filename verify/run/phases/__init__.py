"""The run's order and its verdicts: the phases in sequence (`run`, and the verdict sequence in `verdicts`), the
baseline, self-check and flake re-runs, and `dflash init`'s baseline check (`pristine`: the runs on the unmutated
tree), how many independent reds make a kill (`corroboration`: the one policy every re-run asks), outcomes turned
into verdicts (`judge`), what the run has established so far (`state`), which gates run first (`order`), the
`layout_probe`, the result `cache`, the `coverage_map`, an earlier tree's baseline standing for this one's
(`reuse`), the `details` a report shows. The top of the run: may import every other part.
"""
