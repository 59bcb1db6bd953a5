"""The Ray executor: `dflash verify --executor ray` runs every job as a Ray task on a cluster.

`executor` is the driver side (one `verify.run.jobs.JobExecutor`), `tree` ships the pristine project to the
nodes content-addressed, `task` is what runs inside a Ray worker, `server` the fresh process there that forks
each child, and `preflight` checks what every node has installed. Only these modules import ray.
"""
