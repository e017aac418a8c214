"""Which models the demo reads (the model asked about, the known positive, the untrained twin) and at which layers."""

from __future__ import annotations

from ...errors import InputError
from ...zoo import list_zoo, zoo_card
from ...zoo.registry import is_zoo_spec
from ..demo_config import DEMO_MODEL, DemoConfig

TWIN_KEYS = ("seed", "hidden_size", "n_layers", "n_heads", "patch_size", "image_size", "mlp_ratio")
"""What a random-init twin shares with its model (recipe fields): architecture and initialization seed."""


def random_twin(spec: str) -> str:
    """The zoo's untrained control for `spec`: its `random` model of the same architecture and training seed
    (zoo:mae -> zoo:random, zoo:dino@1 -> zoo:random@1)."""
    if not is_zoo_spec(spec):
        raise InputError(
            f"the demo runs on zoo models (zoo:<name>; `binding-lens zoo list`), beside their random-init twin; "
            f"got {spec!r}"
        )
    card = zoo_card(spec)
    if card["objective"] == "random":
        raise InputError(f"{spec} is the untrained control itself; give a trained zoo model, e.g. --model {DEMO_MODEL}")
    recipe = card["recipe"]
    twins = [
        entry["id"]
        for entry in list_zoo()
        if entry["objective"] == "random" and all(entry["recipe"].get(key) == recipe.get(key) for key in TWIN_KEYS)
    ]
    if not twins:
        raise InputError(f"the zoo has no random-init twin of {spec} (objective random, seed {recipe.get('seed')})")
    return twins[0]


def demo_models(config: DemoConfig) -> list[str]:
    """The models swept, in the order shown: the known positive, the model asked about, the model's twin."""
    random_twin(config.positive)  # a trained zoo model too
    return list(dict.fromkeys((config.positive, config.model, random_twin(config.model))))


def intervention_layer(n_layers: int) -> int:
    """The middle layer the demo edits (block layer + 1 reads the edit, so at most n_layers - 2)."""
    return min(n_layers // 2, n_layers - 2)


def swept_layers(n_layers: int) -> list[int]:
    """The edited layer, the one before and the one after (whose probe reads the edit)."""
    layer = intervention_layer(n_layers)
    return list(range(max(0, layer - 1), layer + 2))
