"""The toy's catalog: one real bug, a rewrite that changes nothing, and a no-op."""

from verify.mutation import Mutation, register

register(
    Mutation(
        name="scale-off",
        bug_class="the scale is 3 instead of 2.5",
        file="toy/engine.py",
        anchor="x * 2.5",
        replacement="x * 3.0",
    ),
    Mutation(
        name="times-one",
        bug_class="x * 1.0: exact in IEEE arithmetic",
        file="toy/engine.py",
        anchor="x * 2.5",
        replacement="x * 1.0 * 2.5",
    ),
    Mutation(
        name="no-op",
        bug_class="a comment added",
        file="toy/engine.py",
        anchor="return x * 2.5",
        replacement="return x * 2.5  # the same",
    ),
    Mutation(
        name="scale-off-again",
        bug_class="the same bug spelt another way",
        file="toy/engine.py",
        anchor="x * 2.5",
        replacement="x * 2.0 + x",
    ),
)
