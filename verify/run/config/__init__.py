"""What a run is asked to do: `[tool.dflash]` read and validated (settings, the `writable` key), the catalog it
names, where the project's modules live (layout), the files a run copies (project), which mutations a run owns
(selection), `dflash init`'s scaffold and which adopted gates are statistical (kit_gates), the checks each
value passes (values), a Ray job's reservation and `ConfigError` (resources), whether the observer's factory can be
made in a private copy (factory), and the subprocess that collects an existing suite (collect_probe). The bottom
of the run: imports nothing else of `verify.run`.
"""
