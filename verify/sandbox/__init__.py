"""What keeps a mutant in its box: Landlock confinement of a child (`confine`: what it may write), its
namespaces (`namespaces`: what it may see: other processes, the network, the machine's /dev/shm; `layers`:
their system calls; `shm`: what a child without its own /dev/shm left in the machine's), its hardening
(`hardening`: environment, stdin, ceilings), the cgroups in which the kernel holds each child to its ceilings
(`cgroups`),
the harness's secrets out of its reach and out of the reports (`secrets`), the reaper that ends what a job
started (`reaper`), the launcher that confines and keeps a command run outside the children (`launch`),
the inventory and guard that prove the user's tree unchanged (`inventory`, `guard`), and
the private copies children work in (`private_copy`: which files and copying them; `copies`: one kept for the
next child), and the scratch folders they sit in, removed once their owner is gone (`scratch`).
The security boundary, readable as one unit: a service the run, `observe` and `sweep` all use, it imports
nothing of theirs (nor of `verify.config`).
"""
