"""Patch-token activations on disk: batched extraction into a resumable, checksummed store."""

from .extract import extract, weights_fingerprint
from .store import ActivationStore, Shard, StoreError, StoreNotFoundError

__all__ = ["ActivationStore", "Shard", "StoreError", "StoreNotFoundError", "extract", "weights_fingerprint"]
