"""The sweep's launcher: confine this process to the sweep's writable folders, then become mutmut.

Run as `python .../verify/sweep/launch.py COMMAND...` with the folders in `WRITABLE` (os.pathsep-separated): a fresh
interpreter is single-threaded, so Landlock (`verify.run.sandbox.confine`) covers every thread, and what it
restricts passes through `exec` to mutmut, its forked workers and every process a mutant starts. A kernel that
has Landlock and refuses a step ends the launcher with REFUSED before mutmut runs, so no mutant runs
unconfined by accident; a kernel without it runs mutmut as it is (the sweep's inventory still checks the
project afterwards). Knows nothing of mutmut's arguments or results.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verify.run.sandbox.confine import ConfineError, confine

WRITABLE = "DFLASH_SWEEP_WRITABLE"
REFUSED = 75  # EX_TEMPFAIL: the sweep reports it as a harness failure, naming the refused step
REFUSAL = "dflash sweep: the kernel refused to confine mutmut"  # how the sweep tells its line from mutmut's output


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: launch.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    folders = [Path(p) for p in os.environ.pop(WRITABLE, "").split(os.pathsep) if p]
    try:
        confine(folders)
    except ConfineError as error:
        print(f"{REFUSAL} ({error}); no mutant was run", file=sys.stderr)
        return REFUSED
    os.execvp(argv[0], argv)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
