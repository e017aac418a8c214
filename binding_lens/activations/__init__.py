"""Patch-token activations: pipelined extraction into a resumable, checksummed store, or into memory.

    extract(model, scenes, layers, out)            the store on disk (resumable; one part per rank under torchrun)
    extract_to_memory(model, scenes, layers)       the same tensors held in memory (the streaming sweep)
    ExtractProfile()                               seconds per stage of one extraction
"""

from .budget import STORE_MODES, choose_store, layer_groups, memory_budget
from .extract import (extract, extract_to_memory, extraction_request, request_differences, slots_per_image,
                      weights_fingerprint)
from .profile import ExtractProfile
from .store import ActivationStore, Shard, StoreError, StoreNotFoundError

__all__ = ["STORE_MODES", "ActivationStore", "ExtractProfile", "Shard", "StoreError", "StoreNotFoundError",
           "choose_store", "extract", "extract_to_memory", "extraction_request", "layer_groups", "memory_budget", "request_differences", "slots_per_image",
           "weights_fingerprint"]
