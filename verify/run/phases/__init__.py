"""phases: see verify/run/__init__.py for what each sub-package owns."""
