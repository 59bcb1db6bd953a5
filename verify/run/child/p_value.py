"""What a red gate says of its own red: the p-value a statistical gate states (the chance that a correct engine
fails its check this way), read in the child where the red happens and journalled with it. The parent decides
what the p-value is worth (`verify.run.phases.corroboration`); this module knows nothing of thresholds or
verdicts.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

__all__ = ["stated_p_value"]


def stated_p_value(exc: BaseException, user_properties: Sequence[tuple[str, object]]) -> float | None:
    """The p-value a red gate stated for its red: a `p_value` attribute on its exception (the gate kit's
    statistical checks raise one), else the last `record_property("p_value", p)` it made before going red (a
    gate records each check's p-value just before asserting it, so the last is the failing check's). None
    when it stated none, or something that is not a probability."""
    stated = getattr(exc, "p_value", None)
    if stated is None:
        stated = next((value for name, value in reversed(user_properties) if name == "p_value"), None)
    if isinstance(stated, bool) or not isinstance(stated, numbers.Real):  # numpy's scalars are Real
        return None
    value = float(stated)
    return value if 0.0 <= value <= 1.0 else None  # NaN fails both comparisons
