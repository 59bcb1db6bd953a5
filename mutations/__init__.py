"""The catalog of registered semantic mutations of the runner, one module per runner area.

Catalog modules import only the mutation record type (`verify.mutation`).
"""
