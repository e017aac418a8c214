"""Patch-token activations: pipelined extraction into a resumable, checksummed store, or into memory.

extract(model, scenes, layers, out)            the store on disk (resumable; one part per rank under torchrun)
extract_to_memory(model, scenes, layers)       the same tensors held in memory (the streaming sweep)
plan_extraction(model, scenes, layers)         the checked request and its size, nothing extracted
ExtractProfile()                               seconds per stage of one extraction
"""

from .budget import STORE_MODES, choose_store, layer_groups, memory_budget
from .extract import (
    ExtractionPlan,
    extract,
    extract_to_memory,
    plan_extraction,
    request_differences,
    weights_fingerprint,
)
from .profile import ExtractProfile
from .store import ActivationStore, Shard, StoreError, StoreNotFoundError

__all__ = [
    "STORE_MODES",
    "ActivationStore",
    "ExtractProfile",
    "ExtractionPlan",
    "Shard",
    "StoreError",
    "StoreNotFoundError",
    "choose_store",
    "extract",
    "extract_to_memory",
    "layer_groups",
    "memory_budget",
    "plan_extraction",
    "request_differences",
    "weights_fingerprint",
]
