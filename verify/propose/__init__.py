"""Proposals: an engine's mutations proposed from its own code, one module per noun.

- `source`: Python text parsed with a way back from a node to its characters (a file, or an anchor: statements,
  a block header, a continuation line of arguments).
- `edit`: the bug classes (`BugClass`), what a rule finds (`Edit`, `Refusal`) and the helpers rules share.
- `sampling_rules` (the acceptance rule), `distribution_rules` (temperature, filters, softmax), `attention_rules`
  (positions, cache, mask): the rules of each bug class, shared by the scanner and `verify.templates`.
- `scanner`: the rules run over one file; anchors made unique; mutants parsed; no-ops dropped.
- `import_probe`, `check`: each mutant imported in a private copy of the project, in a process of its own.
- `writer`: the proposals named and written as a catalog module.
- `api`: `propose`, from a project's settings to a `ProposalRun`.

May import `verify.config` and `verify.sandbox` (the layout, the private copy) and `verify.mutation`;
never the CLI or the report. It never prints. This package's own import pulls in nothing: `verify.templates`
imports its rules without the run.
"""
