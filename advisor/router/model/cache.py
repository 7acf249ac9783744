"""Objects derived from a model's arrays on first use (fused matrices, plain-Python copies for the one-request
hot path, built policies), kept and rebuilt when an array they came from is replaced (a featuriser is refitted,
an ablation drops the class model). Arrays are never changed in place in advisor, so object identity tells when
to rebuild. They live in the model object's own cache (`cache_of`), outside its saved state: never saved, and
not passed on by `dataclasses.replace` (a copy with other arrays builds its own)."""

from __future__ import annotations

from typing import Any, Callable


def cache_of(obj: Any) -> dict[str, Any]:
    """The cache of objects derived from `obj` (kept on the object, created on first use)."""
    return obj.__dict__.setdefault("_derived_cache", {})


def derived(cache: dict[str, Any], name: str, parts: tuple, build: Callable[[], Any]) -> Any:
    """``cache[name]``, built by ``build()`` on first use and again when any of `parts` is no longer the very
    object it was built from."""
    hit = cache.get(name)
    if hit is not None and len(hit[0]) == len(parts) and all(a is b for a, b in zip(hit[0], parts)):
        return hit[1]
    value = build()
    cache[name] = (parts, value)
    return value
