"""The sweep: mutmut's operator mutants of the project's source, run against the gates in a private copy,
mapped back to source functions and to the registered catalog; promotion of survivors; the equivalents file;
the sweep expressed in `verify.report`'s verdict model (`verdicts.py`), whose renderers draw and write it.

May import `verify.run` (settings, the private copy, anchors) and `verify.report`; never `verify.cli`.

The map: `driver` (the sweep, end to end), `requirement` (the one mutmut version it drives), `mutmut_run` (mutmut
as the sweep runs it, through `verify.sandbox.launch`), `mutant` (a mutant's process from the inside), `watch`
(each mutant's ceilings, policed from outside), `undecorate` (decorated functions made reachable), `source`
(runner source as the sweep sees it), `result` (what a sweep found), `report` (survivors by module and function,
mapped to the catalog), `verdicts` (the sweep in verify's verdict model), `render` (the terminal), `triage`
(survivors sorted by observation), `equivalents` (the equivalents file), `promote` (a survivor made a registered
mutation).
"""
