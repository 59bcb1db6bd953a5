"""How jobs reach children: the job and result records with the executor interface (jobs), the warm-parent fork
executor (fork), the parent's deadline over a child's current gate and the job's budget (overtime), which GPUs a
child gets (devices), SIGINT/SIGTERM as interrupts, the Ray executor (cluster/) and the one place that picks an
executor (choice); a child's ceilings and the watch over them (ceilings), a child's exit noticed at once (exits),
what a child left behind made its result (child_result), and the fork executor's warm workers (zygotes). May import
`child`, `verify.config` and `verify.sandbox`; never a phase.
"""
