"""Moved: the shipped zoo's registry lives with the zoo, in `binding_lens.zoo.registry` (one home for the zoo)."""

raise ImportError(
    "binding_lens.models.registry has moved to binding_lens.zoo.registry: import list_zoo, zoo_card, zoo_names, "
    "zoo_path and is_zoo_spec from binding_lens.zoo (the checkpoints are in binding_lens/zoo/checkpoints/)"
)
