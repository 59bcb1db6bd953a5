"""The vendored report viewer: Stryker's mutation-testing-elements bundle, which the HTML page inlines.

`vendor/` holds the package's browser bundle (the IIFE build that defines `<mutation-test-report-app>`), its
Apache-2.0 LICENSE and a VERSION file (package, version, file, sha256) that `make vendor-report` writes when
it fetches a pinned version with `npm pack`. Nothing is fetched at run time. The bundle is checked against
the recorded sha256 before it is used, so a damaged install is a named error, not a blank page; and a bundle
that could end its own `<script>` element early is refused. This module knows nothing of reports.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["VENDOR", "Viewer", "ViewerError", "load_viewer", "read_version"]

VENDOR = Path(__file__).parent / "vendor"
_KEYS = ("package", "version", "file", "sha256")
# What would end an inline <script> early or switch the HTML tokenizer's script state.
_UNSAFE = re.compile(r"</script|<script", re.IGNORECASE)


class ViewerError(Exception):
    """The vendored viewer is missing, damaged (its sha256 differs from VERSION's) or unsafe to inline."""


@dataclass(frozen=True, slots=True)
class Viewer:
    package: str
    version: str
    sha256: str
    script: str  # the bundle's JavaScript, to inline in a <script> element


def read_version(vendor: Path = VENDOR) -> dict[str, str]:
    """VERSION's `key: value` lines, all of package, version, file and sha256."""
    path = vendor / "VERSION"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ViewerError(f"{path}: {error.strerror or error}; run `make vendor-report`") from None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    missing = [key for key in _KEYS if not fields.get(key)]
    if missing:
        raise ViewerError(f"{path}: no {', '.join(missing)}; run `make vendor-report`")
    return fields


@cache
def load_viewer(vendor: Path = VENDOR) -> Viewer:
    fields = read_version(vendor)
    path = vendor / fields["file"]
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ViewerError(f"{path}: {error.strerror or error}; run `make vendor-report`") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != fields["sha256"]:
        raise ViewerError(f"{path}: sha256 {digest}, VERSION records {fields['sha256']}; run `make vendor-report`")
    script = data.decode("utf-8")
    if _UNSAFE.search(script):
        raise ViewerError(f"{path}: holds a <script> tag, which would break the page it is inlined into")
    return Viewer(fields["package"], fields["version"], digest, script)
