"""A toy runner: a handful of functions with known operator mutants."""
