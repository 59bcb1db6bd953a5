"""What runs after fork, inside one child: its life from confinement to `os._exit` (job), the pytest plugin
that journals each gate's outcome (recorder), the job's own stdout and stderr and their ceiling (streams) and the
child's half of the coverage map (coverage). May import
`config`, `sandbox` and `apply`; never an executor or a phase.
"""
