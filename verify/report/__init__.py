"""The verdict model (statuses, outcomes, frozen result records) and every renderer of it: terminal,
JSON, JUnit, Stryker and HTML.

A leaf below `verify.run`: it imports nothing of `verify.run`, `verify.cli` or `verify.sweep`, only
`verify.mutation` (the catalog's record type). Renderers turn records into text and files; they run nothing.
"""
