"""What a run is asked to do: `[tool.dflash]` read and validated (settings, the `writable` key), the catalog it
names, where the project's modules live (layout), the files a run copies (project), which mutations a run owns
(selection), `dflash init`'s scaffold and the example mutation it writes (example), the suite it adopts (adopt)
and which adopted gates are statistical (kit_gates), the checks each value passes (validation), a Ray job's
reservation and `ConfigError` (resources), whether the observer's factory can be made in a private copy
(factory), and the subprocess that collects an existing suite (collect_probe). A service below the run,
`observe` and the sweep, which all read the same table: imports nothing of theirs (nor of `verify.sandbox`).
"""
