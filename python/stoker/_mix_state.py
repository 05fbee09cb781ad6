"""A Mix's epoch in a loader's state: the counters that spare a resume the
replay of the schedule, and the rest of an epoch whose mix changed at the
resume (docs/mixing.md, "Changing the mix at a resume").

A state's "order" recipe of kind "mix" carries a cursor: `at`, the first
position of the recipe's order that the saving job had not consumed (every
position before it was delivered), and `at_counts`, the samples each source
took before it.  MixOrder starts reading there, with nothing replayed.  A
loader whose Mix has other weights or sources than the state's goes on from
that cursor with a new recipe: `base`, the samples each kept source took in
the epoch (a new source: none), and `start`, the positions done; the rest of
the epoch is the new weights' schedule from there (src/order/mix_order.h).
"""
from __future__ import annotations

import hashlib
import struct

from stoker import _native as N

#: What a Mix's recipe declares (the mix itself); a resume compares them.
SPEC = ("sizes", "weights_digest", "keys", "samples", "stop", "shards_digests")


def keys(recipe: dict) -> list:
    """The sources' identities: a dict's name digests, a list's index + 1."""
    return list(recipe.get("keys") or range(1, len(recipe["sizes"]) + 1))


def weights_digest(weights) -> str:
    """The weights as a state carries them (the loader's Mix has them)."""
    return hashlib.blake2b(struct.pack(f"<{len(weights)}d", *weights), digest_size=16).hexdigest()


def shards_digests(shards) -> "list | None":
    """A Mix's sources' shards (Mix.shards: a Parquet source's window and
    row groups) as a state carries them: a digest of each (None for a
    source without); None when no source has any (as a state saved before
    shards were)."""
    if not shards:
        return None
    return [None if s is None else hashlib.blake2b(repr([int(s[0]), [int(n) for n in s[1]]]).encode(),
                                                   digest_size=6).hexdigest() for s in shards]


def shards_arg(shards) -> list:
    """Mix.shards as mix_order takes them."""
    return [(int(s[0]), [int(n) for n in s[1]]) if s else (1, []) for s in shards] if shards else []


def _declared(recipe: dict, k: str):
    if k == "keys":
        return keys(recipe)
    if k == "weights_digest" and "weights" in recipe:
        return weights_digest(recipe["weights"])
    if k == "shards_digests" and "shards" in recipe:
        return shards_digests(recipe["shards"])
    return recipe.get(k)


def same_mix(saved: dict, ours: dict) -> bool:
    return all(_declared(saved, k) == _declared(ours, k) for k in SPEC)


def compact(recipe: dict) -> dict:
    """The recipe as a state carries it: the weights and the sources'
    shards as their digests."""
    out = {k: v for k, v in recipe.items() if k not in ("weights", "shards")}
    out["weights_digest"] = _declared(recipe, "weights_digest")
    out["shards_digests"] = _declared(recipe, "shards_digests")
    return out


def expand(saved: dict, ours: dict) -> dict:
    """A state's recipe of the loader's own Mix (same_mix) with its weights
    and shards."""
    return dict(saved, weights=list(ours["weights"]), shards=ours.get("shards"))


def order_of(recipe: dict):
    """The order of a recipe of kind "mix" (an EpochOrder)."""
    return N.lib.mix_order(list(recipe["sizes"]), list(recipe["weights"]), int(recipe["seed"]), int(recipe["epoch"]),
                           bool(recipe["shuffle"]), int(recipe["samples"]), bool(recipe["stop"]),
                           keys=list(recipe.get("keys") or []), base=list(recipe.get("base") or []),
                           start=int(recipe.get("start", 0)), at=int(recipe.get("at", 0)),
                           at_counts=list(recipe.get("at_counts") or []), shards=shards_arg(recipe.get("shards")))


def consumed_prefix(length: int, segments: list) -> tuple:
    """(p, exact): every position of an order `length` long before p was
    consumed by the segments, and `exact` when nothing past p was (each
    segment took a prefix of what the ones before left)."""
    at = 0
    for seg in segments:
        places = N.lib.consumed_places([tuple(r) for r in seg["read"]], int(seg["world"]),
                                       seg.get("split", "strided") == "strided", int(seg["total"]))
        runs = sorted((b, min(e, length)) for b, e in places if b < min(e, length))
        merged = []
        for b, e in runs:
            if merged and b <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([b, e])
        if not merged:
            continue
        if merged[0][0] != 0 or len(merged) > 1:
            return at + (merged[0][1] if merged[0][0] == 0 else 0), False
        at += merged[0][1]
        length -= merged[0][1]
    return at, True


def cursor(recipe: dict, order, segments: list) -> dict:
    """The recipe with its cursor at the prefix the segments consumed (those
    of the epoch so far and the saving job's own): `order` is the recipe's
    order as the loader read it (its counters' checkpoints are there)."""
    at, exact = consumed_prefix(int(recipe["n"]), segments)
    at = min(at, len(order))
    return dict(recipe, at=int(at), at_counts=[int(c) for c in N.lib.mix_counters(order, at)], exact=exact)


def changed(saved: dict, ours: dict, mix) -> dict:
    """The recipe of the rest of a saved mixed epoch (`saved`, with its
    cursor) under the loader's Mix (`ours`, its recipe; `mix` the Mix, for
    messages): the new weights from the cursor on, each kept
    source from its place.  The epoch's seed and shuffle stay the saved ones
    (a kept source's order within its source-epoch depends on them)."""
    if "at_counts" not in saved:
        raise ValueError("stoker: the state's Mix has other weights or sources than this loader's, and the state "
                         "has no counters to go on from (saved by an older stoker): resume with the saved Mix, or "
                         "from a state taken between epochs")
    if not saved.get("exact", False):
        raise ValueError("stoker: the state's Mix has other weights or sources than this loader's, and the saved "
                         "job had delivered batches past its first undelivered one (in_order=False): a changed mix "
                         "goes on from a point before which every sample was delivered. Resume with the saved Mix, "
                         "or save with in_order=True")
    if bool(saved["stop"]) != bool(ours["stop"]):
        raise ValueError("stoker: the state's Mix and this loader's differ in on_exhausted: change it between epochs")
    old = {k: (int(size), int(b) + int(c)) for k, size, b, c in
           zip(keys(saved), saved["sizes"], saved.get("base") or [0] * len(saved["sizes"]), saved["at_counts"])}
    was_sharded = dict(zip(keys(saved), _declared(saved, "shards_digests") or [None] * len(saved["sizes"])))
    sharded = _declared(ours, "shards_digests") or [None] * len(ours["sizes"])
    base = []
    for i, (k, size) in enumerate(zip(keys(ours), ours["sizes"])):
        if k in old and old[k][0] != int(size):
            raise ValueError(f"stoker: source {mix.source_name(i)} of the Mix had {old[k][0]} samples when the state was saved and "
                             f"has {size} now: a source that changes size mid-epoch cannot go on from its place. "
                             "Give it another name (a new source), or resume from a state taken between epochs")
        if k in old and was_sharded[k] != sharded[i]:
            raise ValueError(f"stoker: source {mix.source_name(i)} of the Mix had other row groups or another "
                             "shuffle_window when the state was saved: its shuffled order would change mid-epoch and "
                             "repeat rows. Keep its files and shuffle_window, give it another name (a new source), or "
                             "resume from a state taken between epochs")
        base.append(old[k][1] if k in old else 0)
    start = int(saved.get("start", 0)) + int(saved["at"])
    recipe = dict(ours, seed=saved["seed"], epoch=saved["epoch"], shuffle=saved["shuffle"], base=base, start=start)
    for k in ("at", "at_counts", "exact"):
        recipe.pop(k, None)
    recipe["n"] = len(order_of(recipe))
    return recipe
