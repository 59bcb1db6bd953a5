"""The toy's registered catalog: one mutation inside num_accepted."""

from verify.mutation import Mutation, register

register(
    Mutation(
        name="accept-on-mismatch",
        bug_class="acceptance compares with the wrong sense",
        file="toyrunner/accept.py",
        anchor="        if d != t:",
        replacement="        if d == t:",
    )
)
