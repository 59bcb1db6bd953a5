"""The run: from a project's `[tool.dflash]` table to a `RunReport`, one sub-package per concern.

- `child/`: what runs after fork (one job's life, the gate recorder and the p-value a red gate states, the
  child's half of coverage, the warm worker and its hot swap).
- `execution/`: how jobs reach children (the job records, the fork executor and its warm workers, devices,
  interrupts, the Ray
  executor in `cluster/`, and `choice`, which picks one).
- `phases/`: the run's order and its verdicts (the pristine runs: baseline, self-check, flake re-runs; the
  corroboration policy, judge, order, the layout probe, the cache, the coverage map, report details).
- `harness_digest` (the digest of the harness's code, the cache key) stands flat.

Imports point down: phases -> execution -> child, and every one may use `verify.config` (what the run is asked to
do) and `verify.sandbox` (what keeps a mutant in its box), the services the run shares with observe and the sweep,
and anything may use `harness_digest`; tests/test_layout.py enforces it. The run may import `runner`,
`verify.mutation` and `verify.report` (to build verdict records), never `verify.cli` or `verify.sweep`. It never
prints: it returns records and reports progress through callbacks.

A job's path, process by process:

    fork executor (`--executor fork`, the default; one machine)
      CLI process: phases.run -> execution.choice -> execution.fork.Executor (the warm parent: the pristine
        private copy, preload modules and pytest imported once, never the project's own modules)
        -> os.fork() -> child: child.job.run_child (confine itself with Landlock, in a copy of the pristine
           tree the parent made or took back unchanged from an earlier child (sandbox.copies), install the
           mutant import hook, run the gates under pytest with child.recorder journalling each
           gate; everything it starts is reaped when the job ends) -> result.json + journal, then os._exit
           (a run without coverage exits from pytest's session end, skipping its summary and unconfigure)
        or, for a job a warm worker can serve (execution.zygotes): the worker, a child that ran
           child.zygote.run_zygote (confined, the project imported and every gate collected once under pytest)
           -> os.fork() -> a middle process -> os.fork() -> the job's child, handed to the parent as its own
           child when the middle one exits (born in its cgroup: the worker is in it while it forks): its own
           confinement, ceilings, log and capture files, the mutated functions' code swapped in (child.hotswap),
           then pytest runs only its gates with child.recorder, as above
      <- parent reads the journal (sealed, child.journal) and result.json into a JobResult
         (execution.child_result.collect), kills the child's process group past its budget or past its current
         gate's deadline, whatever the child does with signals (execution.overtime)

    Ray executor (`--executor ray`)
      CLI process (the driver): phases.run -> execution.choice -> execution.cluster.executor.RayExecutor
        (preflight on every node, the pristine tree put in the object store once)
        -> Ray task execution.cluster.task.run_job, in a Ray worker process on some node (unpacks the tree)
        -> execution.cluster.server, a fresh single-threaded process the worker keeps (`python -m ...`):
           a warm execution.fork.Executor over the node's tree
           -> os.fork() -> child: child.job.run_child, exactly as above
        <- the JobResult travels back as data: server (pipe) -> task (Ray return value) -> driver
"""
