"""Patch-token activations on disk: batched extraction into a resumable, checksummed store."""

from .extract import extract, weights_fingerprint
from .store import ActivationStore, Shard, StoreError

__all__ = ["ActivationStore", "Shard", "StoreError", "extract", "weights_fingerprint"]
