"""stoker.cache: the name of stoker.streaming before it said what it holds
(the streaming dataset over a remote store).  It is that module itself:
`stoker.cache.StreamingDataset is stoker.streaming.StreamingDataset`."""
import sys

from stoker import streaming as _streaming

sys.modules[__name__] = _streaming
