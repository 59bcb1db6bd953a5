"""What keeps a mutant in its box: Landlock confinement of a child, the reaper that ends what a job started, the
inventory and guard that prove the user's tree unchanged, the private copies children work in, and the cgroups in
which the kernel holds each child to its ceilings. The
security boundary, readable as one unit: imports nothing else of `verify.run`.
"""
