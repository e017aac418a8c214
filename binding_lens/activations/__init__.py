"""Patch-token activations: pipelined extraction into a resumable, checksummed store, or into memory.

extract(model, scenes, layers, out)            the store on disk (resumable; one part per rank under torchrun)
extract_to_memory(model, scenes, layers)       the same tensors held in memory (the streaming sweep)
plan_extraction(model, scenes, layers)         the checked request and its size, nothing extracted
ExtractConfig(patches_per_image=..., ...)      the settings of both, as one value (or pass them as keywords)
ExtractProfile()                               seconds per stage of one extraction
ActivationStore(path).load(layers)             a store read back (a `store.Shard`)

The rest lives in its module: the memory budget and the store/memory choice (`STORE_MODES`,
`choose_store`, `memory_budget`, `layer_groups`) in `budget`, `Shard` in `store`, the planning in `plan`, and
what a store's manifest records (`weights_fingerprint`, `request_differences`) in `request`.
"""

from .extract import extract as extract
from .extract import extract_to_memory
from .plan import ExtractConfig, ExtractionPlan, plan_extraction
from .profile import ExtractProfile
from .store import ActivationStore as ActivationStore
from .store import StoreError, StoreNotFoundError

__all__ = [
    "ExtractConfig",
    "ExtractProfile",
    "ExtractionPlan",
    "StoreError",
    "StoreNotFoundError",
    "extract_to_memory",
    "plan_extraction",
]
