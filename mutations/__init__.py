"""The catalog of registered semantic mutations of the runner, one module per runner area.

Catalog modules import only the mutation record type and `register`, from the public import point (`from
verify import Mutation, register`, which loads `verify.mutation` alone).
"""
