"""Adapters over the private (undocumented or underscore) APIs of the libraries the project
depends on: each library's private uses sit in one module here, whose docstring names them and
the versions they were checked against, and whose test (tests/compat/) pins those versions to
pyproject's — an upgrade fails that test until the adapter is checked again
(docs/architecture.md, Private APIs of libraries).

kombu's lives beside the setting that selects it: `config.redis_transport`.
"""
