"""stoker.streaming.Store: one store by URL (a directory, http(s)://, s3://),
with S3's options as boto3 names them, in a module of its own below
stoker.streaming."""
from __future__ import annotations

import os
from typing import Mapping

from stoker import _native as N


def _storage_options(options: Mapping[str, str] | None, where: str) -> dict:
    """An s3:// store's options, by boto3's names (the extension knows them
    and names an unknown one); each one left out, or None, is found as the
    AWS SDKs find it (the environment, ~/.aws/credentials, ~/.aws/config)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"{where}: storage_options should be a dict, got {type(options).__name__}")
    out = {}
    for k, v in options.items():
        if v is not None and not isinstance(v, str):
            raise TypeError(f"{where}: storage_options[{k!r}] should be a str, got {type(v).__name__}")
        out[str(k)] = v or ""  # ("": not given)
    return out


class Store(N.lib.Store):
    """Store(url, attempts=5, backoff_s=0.1, max_backoff_s=5.0,
    connect_timeout_s=10.0, stall_timeout_s=30.0, receive_in_place=True,
    storage_options=None): one store by URL: a directory (or file://...),
    http(s)://..., or s3://bucket/prefix (storage_options: endpoint_url,
    region_name, profile_name, aws_access_key_id, aws_secret_access_key,
    aws_session_token, as boto3 names them).  Methods: size(name), read(name,
    offset, n), read_all(name), download(name, path), list() (s3: the
    objects under the prefix, [(name, size)])."""

    def __init__(self, url: str | os.PathLike, *args, storage_options: Mapping[str, str] | None = None, **kw):
        super().__init__(os.fspath(url), *args, storage_options=_storage_options(storage_options, "Store"), **kw)
