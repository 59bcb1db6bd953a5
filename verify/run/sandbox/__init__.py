"""What keeps a mutant in its box: Landlock confinement of a child, the reaper that ends what a job started, the
inventory and guard that prove the user's tree unchanged, and the private copies children work in. The
security boundary, readable as one unit: imports nothing else of `verify.run`.
"""
