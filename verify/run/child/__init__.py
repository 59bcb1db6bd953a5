"""What runs after fork, inside one child: its life from confinement to `os._exit` (job), the pytest plugin that
journals each gate's outcome (recorder) into its sealed journal (journal, which its parent reads back), the check
that the harness's code is what the run loaded (integrity), a gate's in-child deadline (deadline), the stated
p-value of a red gate (p_value), the job's own stdout and stderr and their ceiling (streams), the warm worker and
its hot swap (zygote, hotswap) and the child's half of the coverage map (coverage). May import `verify.config`,
`verify.sandbox` and `verify.mutation.apply`; never an executor or a phase.
"""
