"""Moved: `binding_lens.subspace` was the path before the `binding` package; the home is `binding_lens.binding`."""

raise ImportError(
    "binding_lens.subspace has moved: import BindingSubspace, SubspaceProbe and accuracy_by_k from binding_lens.binding"
)
