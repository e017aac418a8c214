"""Moved: `binding_lens.subspace` was the path before the `binding` package; the home is `binding_lens.binding`."""

raise ImportError(
    "binding_lens.subspace has moved: `from binding_lens.binding import BindingSubspace, accuracy_by_k` and "
    "`from binding_lens.binding.subspace import SubspaceProbe`"
)
