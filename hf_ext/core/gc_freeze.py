"""Keeping Python's cyclic garbage collector off the long-lived heap during a block of training runs (`gc.freeze`).

`Trainer.train()` ends (and, through accelerate's `free_memory`, may start) with a full `gc.collect()`. In a
process that holds torch, transformers, datasets, Flower and the reproductions' caches (~500 k live objects) one
full collection took 1-2 s on the loaded 2-core machine: 38 % of a FedE4RAG grid cell, most of TinyAlign's fast
fine-tuning test. [`gc_frozen`] collects once, then moves every object alive at that moment into the collector's
permanent generation for the block, so the collections inside it scan only what the block itself created. The
collector frees only unreachable cycles, so no number changes; what the block creates is collected as usual.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_depth = 0


@contextlib.contextmanager
def gc_frozen() -> Iterator[None]:
    """Collects once, freezes every live object (`gc.freeze`) for the block, and unfreezes them at its end.

    Nested blocks collect and freeze what was created since the outer one started; only the outermost block
    unfreezes (`gc.unfreeze` releases the whole permanent generation at once), so an inner block never exposes the
    outer block's heap to the collector again.

    Example:

    ```python
    with gc_frozen():
        for seed in seeds:
            Trainer(...).train()  # its full gc.collect() skips the heap that existed before the block
    ```
    """
    global _depth
    gc.collect()
    gc.freeze()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            gc.unfreeze()
