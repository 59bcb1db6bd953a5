"""The catalog of registered semantic mutations of the runner, one module per runner area.

Catalog modules import only the mutation record type and `register`, from the public import point (`from
verify import Mutation, register`, which loads `verify.mutation` alone).

The map, by the runner area each mutates: `sampling` (acceptance and sampling), `draft` (the draft's attention,
context and inputs), `dflash2` (DFlash2's additions), `model` (the model maths and checkpoint loading), `paging`
(the paged KV cache, the page allocator and the scheduler), `engine` (the engine's bookkeeping), `store` (what
the draft reads from its store).
"""
