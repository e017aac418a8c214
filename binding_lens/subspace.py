"""`binding_lens.subspace`: kept for scripts written before the `binding` package; the home is
`binding_lens.binding.subspace`."""

from .binding.subspace import BindingSubspace, SubspaceProbe, accuracy_by_k

__all__ = ["BindingSubspace", "SubspaceProbe", "accuracy_by_k"]
