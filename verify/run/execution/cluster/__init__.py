"""The Ray executor: `dflash verify --executor ray` runs every job as a Ray task on a cluster.

`executor` is the side in `dflash` (one `verify.run.execution.jobs.JobExecutor`, which imports no Ray): it starts and
watches `driver`, the process that holds the cluster connection and sends the tasks. `preflight` checks what
every node has installed and the confinement it gives a child, `tree` ships the pristine project to the nodes
content-addressed, `task` is what runs inside a Ray worker, and `server` the fresh process there that forks
each child. Only `driver`, `preflight` and `task` import ray.
"""
