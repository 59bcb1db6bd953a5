"""The run: a project's settings, applying a mutation, the executor and its children, the phases
(baseline, self-check, mutations), the cache and the coverage map.

May import `runner`, `verify.mutation` and `verify.report` (to build verdict records); never `verify.cli`
or `verify.sweep`. Never prints: it returns records and reports progress through callbacks.
"""
