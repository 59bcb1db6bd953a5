"""The sweep: mutmut's operator mutants of the project's source, run against the gates in a private copy,
mapped back to source functions and to the registered catalog; promotion of survivors; the equivalents file;
the sweep expressed in `verify.report`'s verdict model (`verdicts.py`), whose renderers draw and write it.

May import `verify.run` (settings, the private copy, anchors) and `verify.report`; never `verify.cli`.
"""
