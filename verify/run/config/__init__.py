"""What a run is asked to do: `[tool.dflash]` read and validated (settings, the `writable` key), the catalog it
names, where the project's modules live (layout), the files a run copies (project), which mutations a run owns
(selection), `dflash init`'s scaffold and which adopted gates are statistical (kit_gates). The bottom of the
run: imports nothing else of `verify.run`.
"""
