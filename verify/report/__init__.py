"""The verdict model (statuses, outcomes, frozen result records) and every renderer of it: terminal,
JSON, JUnit, Stryker, HTML (Stryker's viewer, vendored in `vendor/`) and review annotations.

A leaf below `verify.run`: it imports nothing of `verify.run`, `verify.cli` or `verify.sweep`, only
`verify.mutation` (the catalog's record type). Renderers turn records into text and files; they run nothing.

The map: `verdict` (statuses, outcomes, result records), `summary` (the verdict in words), `decode` (records read
back from JSON), `crashes` (the named kinds of a crash); the files: `json_report` (the JSON report, reading it
back, merging shards), `formats` (the registry of report file formats the commands offer), `junit`, `stryker`,
`annotations` (GitHub annotations, GitLab code quality), `html` with `html_assets` and `viewer` (Stryker's vendored
viewer); the terminal (the only modules that import rich): `terminal`, `matrix_view` over `matrix` (the matrix as
data, which the HTML page draws too), `catalog_view`, `progress`, `fit` (output fitted to a width).
"""
