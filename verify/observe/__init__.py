"""Observation runs: what a mutant changes, step by step, beside the pristine tree.

`record` (observables and their normal form), `protocol` (the observer a project names, run workload by
workload), `gate_record` (the project's own gates as workloads, the source roots' returns recorded: explain
without an observer, and the measured gate hint beside one), `runner_observer`/`runner_hooks`/`refusals` (the
embedded runner's observer), `worker` (the subprocess that observes the pristine tree and each mutant in forked
children), `session` (the private copy and the worker, from the parent), `reach` (whether an observation reached a
mutant's changed lines), `compare` (divergences and the float tolerance), `explain` (the text a person
reads), `api` (the entry points for the CLI, verify's survivors and the sweep's triage), `kept` (a verify run's
explanations kept across runs of the same tree).
"""
