"""Typed reads of `config.json` values: every value is checked for its JSON type and range before a config
record is built, and a bad one is refused by a `CheckpointError` that names the key and the file.

`int("abc")` or `float([1])` would escape as a bare ValueError/TypeError and `int(2.7)` or `int(True)` would
silently truncate, so nothing here converts: an integer must be a JSON integer, a number a JSON number, a flag
a JSON boolean. A leaf below `config`: it knows dicts and errors, not models.
"""

from __future__ import annotations

import math
from typing import Any

from runner.errors import CheckpointError

MISSING: Any = object()  # a required key: no default


class ConfigReader:
    """Reads one `config.json` dict (or a nested section of it); `where` names the file in every error."""

    def __init__(self, raw: dict[str, Any], where: str, section: str = "") -> None:
        self.raw = raw
        self.where = where
        self.section = section

    def _name(self, key: str) -> str:
        return f"{self.section}.{key}" if self.section else key

    def refuse(self, key: str, wanted: str, value: Any) -> CheckpointError:
        return CheckpointError(
            f"{self.where}: config key {self._name(key)!r} must be {wanted}, got {value!r} ({type(value).__name__})"
        )

    def get(self, key: str, default: Any = MISSING) -> Any:
        if key not in self.raw:
            if default is MISSING:
                raise CheckpointError(f"{self.where}: lacks required key {self._name(key)!r}")
            return default
        return self.raw[key]

    def integer(self, key: str, default: Any = MISSING, *, minimum: int | None = 1, or_none: bool = False) -> Any:
        value = self.get(key, default)
        if value is None and or_none:
            return None
        return self.check_integer(key, value, minimum)

    def check_integer(self, key: str, value: Any, minimum: int | None) -> int:
        wanted = "an integer" if minimum is None else f"an integer >= {minimum}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.refuse(key, wanted, value)
        if minimum is not None and value < minimum:
            raise self.refuse(key, wanted, value)
        return value

    def number(self, key: str, default: Any = MISSING, *, positive: bool = False, or_none: bool = False) -> Any:
        """A finite JSON number (an integer is a number); `positive` also refuses zero and negatives."""
        value = self.get(key, default)
        if value is None and or_none:
            return None
        wanted = "a positive finite number" if positive else "a finite number"
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.refuse(key, wanted, value)
        if positive and value <= 0:
            raise self.refuse(key, wanted, value)
        return float(value)

    def flag(self, key: str, default: Any = MISSING, *, or_none: bool = False) -> Any:
        value = self.get(key, default)
        if value is None and or_none:
            return None
        if not isinstance(value, bool):
            raise self.refuse(key, "true or false", value)
        return value

    def string(self, key: str, default: Any = MISSING) -> str:
        value = self.get(key, default)
        if not isinstance(value, str):
            raise self.refuse(key, "a string", value)
        return value

    def integers(self, key: str, default: Any = MISSING, *, minimum: int | None = 0) -> tuple[int, ...]:
        """A JSON list of integers; a single integer reads as a one-element list (HF writes both for eos)."""
        value = self.get(key, default)
        items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(items, list):
            raise self.refuse(key, "a list of integers", value)
        return tuple(self.check_integer(key, item, minimum) for item in items)

    def strings(self, key: str, default: Any = MISSING) -> tuple[str, ...]:
        value = self.get(key, default)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.refuse(key, "a list of strings", value)
        return tuple(value)

    def nested(self, key: str) -> ConfigReader:
        """A section such as `dflash_config` (absent or null reads as empty)."""
        value = self.get(key, None)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.refuse(key, "an object", value)
        return ConfigReader(value, self.where, self._name(key))
