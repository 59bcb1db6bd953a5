"""dflash-verify: the `dflash` CLI and the mutation-testing engine around the runner.

`verify` may import `runner`; `runner` never imports `verify`.
"""
