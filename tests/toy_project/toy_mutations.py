"""The toy catalog: one mutation per verdict the engine can reach."""

from verify.mutation import Mutation, mutation, register

ARITH = "toy/arith.py"
TEXT = "toy/text.py"

register(
    Mutation(
        "add-off-by-one",
        "off-by-one in a sum (killed by an assertion)",
        ARITH,
        "return a + b",
        "return a + b + 1",
        expect_killed_by=("tests/gates/test_arith.py::test_add",),
    ),
    Mutation(
        "add-type-error", "wrong operand type (killed by an exception)", ARITH, "return a + b", "return a + str(b)"
    ),
    Mutation("sub-swaps-operands", "operands swapped", ARITH, "return a - b", "return b - a"),
    Mutation("mul-adds", "wrong operator", ARITH, "return a * b", "return a + b"),
    Mutation("describe-label", "wrong label (only a vacuous gate reaches it)", TEXT, '"value"', '"valu"'),
    Mutation("stale-absent", "anchor absent", ARITH, "return a ** b", "return a * b"),
    Mutation("stale-twice", "anchor matches twice", TEXT, "return result", "return None"),
    Mutation("orphan-unreached", "code no gate reaches", ARITH, "return a % 7", "return a % 8"),
    Mutation("sub-hangs", "infinite loop", ARITH, "return a - b", "while True: pass"),
)


@mutation
def mul_crashes() -> Mutation:
    return Mutation("mul-crashes", "process abort", ARITH, "return a * b", "return __import__('os').abort()")
