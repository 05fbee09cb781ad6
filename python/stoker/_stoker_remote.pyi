"""
stoker's http(s):// and s3:// stores (used by stoker._stoker; no Python API)
"""
from __future__ import annotations
import typing
__all__: list[str] = ['open_store']
open_store: typing.Any  # a capsule holding OpenRemoteStore, which stoker._stoker calls
