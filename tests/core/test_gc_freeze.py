"""`hf_ext.core.gc_freeze.gc_frozen`: the heap alive at entry is hidden from the collector for the block and handed
back at its end; garbage is still freed (dead cycles before the block at entry, cycles made inside by collections
inside), nesting keeps the outer block frozen, and an exception still unfreezes."""

import gc
import weakref

import pytest

from hf_ext.core.gc_freeze import gc_frozen


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def _tracked(obj) -> bool:
    """Whether the collector's generations (not the frozen permanent one) hold `obj`."""
    return any(o is obj for o in gc.get_objects())


@pytest.fixture(autouse=True)
def _nothing_frozen():
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()  # a failed test must not leave the rest of the session frozen


def test_the_heap_alive_at_entry_is_frozen_for_the_block_and_released_after():
    before = _Node()
    assert _tracked(before)
    with gc_frozen():
        assert gc.get_freeze_count() > 0
        assert not _tracked(before)  # a full collection inside the block never scans it
        inside = _Node()
        assert _tracked(inside)  # what the block creates is collected as usual
    assert gc.get_freeze_count() == 0
    assert _tracked(before) and _tracked(inside)


def test_garbage_is_still_freed():
    dead_before = _Node()
    ref_before = weakref.ref(dead_before)
    del dead_before  # unreachable, but alive until a collection: entry must collect it, not freeze it forever
    with gc_frozen():
        assert ref_before() is None
        dead_inside = _Node()
        ref_inside = weakref.ref(dead_inside)
        del dead_inside
        gc.collect()  # as Trainer.train() does
        assert ref_inside() is None


def test_an_object_alive_at_entry_that_dies_inside_is_freed_after_the_block():
    node = _Node()
    ref = weakref.ref(node)
    with gc_frozen():
        del node
        gc.collect()
        assert ref() is not None  # frozen: the price of skipping the heap, paid only until the block ends
    gc.collect()
    assert ref() is None


def test_nested_blocks_keep_the_outer_heap_frozen_and_an_exception_unfreezes():
    outer_obj = _Node()
    with pytest.raises(RuntimeError):
        with gc_frozen():
            with gc_frozen():
                inner_obj = _Node()  # made inside the inner block: collected as usual
                assert _tracked(inner_obj)
            assert not _tracked(outer_obj)  # the inner exit did not unfreeze the outer block's heap
            raise RuntimeError("a failing training run")
    assert gc.get_freeze_count() == 0
    assert _tracked(outer_obj)
