"""The verdict model (statuses, outcomes, frozen result records) and every renderer of it: terminal,
JSON, JUnit, Stryker, HTML (Stryker's viewer, vendored in `vendor/`) and review annotations.

A leaf below `verify.run`: it imports nothing of `verify.run`, `verify.cli` or `verify.sweep`, only
`verify.mutation` (the catalog's record type). Renderers turn records into text and files; they run nothing.
"""
