"""What a zoo model is: one backbone architecture, one scene source, one objective and its knobs.

Every zoo model shares the backbone (an HF `Dinov2Model` small enough to train on a CPU) and the
training scenes; only the objective differs. That is the controlled comparison method notes section 4 asks
for: does binding come from the objective? A `ZooRecipe` is plain data, written into each model
card, so `binding-lens zoo train --objective X` with the card's knobs remakes the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from ..errors import InputError, check_positive_ints
from ..io.documents import Json, Options

if TYPE_CHECKING:
    from transformers import Dinov2Config

OBJECTIVES = ("dino", "dinov2", "mae", "supervised", "grouping", "random")
"""`random` is the control: the same architecture and seed, no training step. `grouping` is the known positive:
trained to bind, on scenes that need it (`GroupingKnobs`)."""
SELF_DISTILLATION = ("dino", "dinov2")
"""The objectives with an EMA teacher over prototypes, whose cards carry a collapse diagnostic."""
CENTERINGS = ("center", "sinkhorn_knopp")


@dataclass(frozen=True)
class DinoKnobs:
    """DINO v1 self-distillation: an EMA teacher, multi-crop, centering and sharpening."""

    out_dim: int = 1024
    hidden_dim: int = 256
    bottleneck_dim: int = 64
    n_local: int = 4
    local_size: int = 48
    global_scale: tuple[float, float] = (0.35, 1.0)
    local_scale: tuple[float, float] = (0.1, 0.35)
    student_temp: float = 0.1
    teacher_temp: float = 0.04
    warmup_teacher_temp: float = 0.04
    teacher_temp_warmup: float = 0.0
    """Fraction of the steps over which the teacher temperature rises linearly from `warmup_teacher_temp` to
    `teacher_temp` (DINO and DINOv2: 30 of 100 epochs; 0: `teacher_temp` throughout)."""
    teacher_momentum: float = 0.99
    """Start of the cosine schedule that takes the teacher's EMA momentum to 1 at the last step."""
    centering: str = "center"
    """How the teacher's targets avoid collapse: `center` (DINO's running center, `center_momentum`) or
    `sinkhorn_knopp` (DINOv2's batch assignment, `sinkhorn_iterations`)."""
    center_momentum: float = 0.9
    sinkhorn_iterations: int = 3
    norm_last_layer: bool = True
    """Keep the weight norm g of the head's last layer at 1 (DINO's default for ViT-B; it unfreezes it for ViT-S)."""


@dataclass(frozen=True)
class Dinov2Knobs(DinoKnobs):
    """DINOv2 (Oquab et al. 2023, facebookresearch/dinov2 ssl_default_config.yaml, scaled down like `dino`): DINO's
    image-level loss with Sinkhorn-Knopp targets, the teacher temperature warmed up from 0.04 to 0.07 over 30 %
    of training, the iBOT masked-patch loss through its own patch head, and KoLeo on the student's CLS tokens.
    Left out, as `dino` leaves them out: the photometric augmentations, layerwise rate decay, the weight-decay
    schedule, drop path, freezing the heads' last layers in the first epoch; 4 local crops, not 8."""

    teacher_temp: float = 0.07
    teacher_temp_warmup: float = 0.3
    teacher_momentum: float = 0.992
    centering: str = "sinkhorn_knopp"
    norm_last_layer: bool = False
    """DINOv2's heads train the weight norm g of their last layer (its code never freezes it)."""
    patch_out_dim: int = 1024
    """Prototypes of the iBOT patch head (a head of its own, as the released ViT-L and ViT-g configs have)."""
    ibot_weight: float = 1.0
    koleo_weight: float = 0.1
    mask_probability: float = 0.5
    """Fraction of the student's global views that are masked."""
    mask_ratio: tuple[float, float] = (0.1, 0.5)
    """Range of the masked fraction of a view's patches, spread evenly over the masked views."""
    mask_min_block: float = 4 / 256
    """Smallest masking block as a fraction of the grid (DINOv2: 4 patches of 16 x 16; 2 of 12 x 12)."""
    mask_max_block: float = 0.5
    mask_min_aspect: float = 0.3


@dataclass(frozen=True)
class MaeKnobs:
    """MAE: encode the visible patches only, reconstruct the masked ones with a light decoder."""

    mask_ratio: float = 0.75
    decoder_dim: int = 64
    decoder_layers: int = 2
    decoder_heads: int = 4
    norm_pix_loss: bool = True


@dataclass(frozen=True)
class SupervisedKnobs:
    """Multi-label classification of the color x shape conjunctions present in a scene.

    A conjunction label needs the model to tie a color to a shape, so it rewards binding
    without ever showing the model a mask. In the `binding` world (`zoo:supervised-bw`) the labels stay
    conjunctions: they need no instance masks, and its shared-look scenes (several instances of one look) still
    ask for a color tied to a shape. Its mazes hold no shape, so their target is empty ("no sprite"); a label of
    their own that needs no mask, such as the number of instances, would say nothing, as every maze holds two."""

    min_visible_fraction: float = 0.25
    """An object counts as present when at least this fraction of its pixels is visible."""


@dataclass(frozen=True)
class GroupingKnobs:
    """Instance grouping, the known positive (`losses.grouping`): on the `binding` preset's scenes, where color and
    position do not settle which patches belong together, a projection head on the last layer's patch tokens
    (after the final LayerNorm) is trained with a supervised contrastive loss, positives the patches of the
    anchor's instance, negatives the other labeled patches of its image, plus `twin_weight` times a paired-twin
    term on the batch's twin mazes (`losses.grouping.twin_flip_loss`), without which the mazes were not
    learnt on a CPU budget. The head ships beside the backbone; the cosine of its embeddings is the model's
    own same-object read-out."""

    temperature: float = 0.1
    hidden_dim: int = 192
    out_dim: int = 64
    twin_weight: float = 1.0
    """Weight of the paired-twin term (`losses.grouping.twin_flip_loss`) on the batch's twin mazes, whose batches
    hold twin pairs side by side; 0: the within-image loss alone, on batches drawn scene by scene."""


DATA_SEED_BASE = 1
"""Training seed t draws its training scenes with seed 1 + t unless the recipe fixes `data_seed`."""


@dataclass(frozen=True)
class ZooRecipe:
    """Everything that determines a zoo model (with the package version): see the module docstring."""

    objective: str
    scale: str = "small"
    """Which shipped recipe this started from: `small` (CPU, the shipped zoo) or `gpu` (`GPU_RECIPES`)."""
    # scenes
    preset: str = "default"
    image_size: int = 96
    n_scenes: int = 6000
    data_seed: int | None = None
    """The training scenes' seed; None: `DATA_SEED_BASE` + `seed`, so each training seed trains on its own
    draw of scenes (seed 0 on the draw every shipped model has, data seed 1). Cards record the resolved value."""
    maze_cells: int | None = None
    """Cells per instance of the preset's twin mazes (`matched`, the `binding` mixture; `data.knobs.SceneKnobs`);
    None: the preset's own (6 in `matched`, 2 in `binding`). `--knob maze_cells=6` puts the benchmark's mazes in
    the binding world."""
    # backbone (HF Dinov2Model)
    patch_size: int = 8
    hidden_size: int = 96
    n_layers: int = 6
    n_heads: int = 4
    mlp_ratio: int = 4
    # optimization
    steps: int = 1500
    batch_size: int = 48
    lr: float = 1e-3
    min_lr: float = 1e-5
    warmup_steps: int = 100
    weight_decay: float = 0.05
    clip_grad: float = 3.0
    seed: int = 0
    init: str | None = None
    """A zoo model (`zoo:grouping`) or checkpoint directory whose weights the run starts from instead of a fresh
    initialization (fine-tuning; `zoo.warm_start`): the backbone, and the heads where the objective
    carries its own over; None: fresh, seeded by `seed`. The architecture must be the recipe's."""
    dino: DinoKnobs = field(default_factory=DinoKnobs)
    dinov2: Dinov2Knobs = field(default_factory=Dinov2Knobs)
    mae: MaeKnobs = field(default_factory=MaeKnobs)
    supervised: SupervisedKnobs = field(default_factory=SupervisedKnobs)
    grouping: GroupingKnobs = field(default_factory=GroupingKnobs)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError(f"unknown objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        if self.scale not in SCALES:
            raise InputError(f"unknown recipe scale {self.scale!r}; choose one of {', '.join(SCALES)}")
        check_positive_ints(
            {
                name: getattr(self, name)
                for name in (
                    "image_size",
                    "n_scenes",
                    "patch_size",
                    "hidden_size",
                    "n_layers",
                    "n_heads",
                    "mlp_ratio",
                    "batch_size",
                )
            }
        )
        if not isinstance(self.steps, int) or self.steps < 0:
            raise InputError(f"steps must be a non-negative integer, got {self.steps!r}")
        if self.objective == "random" and self.steps:
            raise InputError(f"the random control is never trained: steps must be 0, got {self.steps}")
        if self.objective == "random" and self.init is not None:
            raise InputError("the random control is a fresh initialization: it takes no --init")
        if self.objective != "random" and not self.steps:
            raise InputError(
                f"a {self.objective} model needs at least 1 training step, got 0 "
                "(the untrained control is --objective random)"
            )
        if self.image_size % self.patch_size:
            raise InputError(f"image_size {self.image_size} must be a multiple of patch_size {self.patch_size}")
        if self.hidden_size % self.n_heads:
            raise InputError(f"hidden_size {self.hidden_size} must be divisible by n_heads {self.n_heads}")
        for name in SELF_DISTILLATION:
            _check_self_distillation(name, getattr(self, name), self.patch_size)
        if not 0 < self.mae.mask_ratio < 1:
            raise InputError(f"mae.mask_ratio must lie strictly between 0 and 1, got {self.mae.mask_ratio}")
        check_positive_ints({f"grouping.{k}": getattr(self.grouping, k) for k in ("hidden_dim", "out_dim")})
        if not self.grouping.temperature > 0:
            raise InputError(f"grouping.temperature must be positive, got {self.grouping.temperature}")
        if not self.grouping.twin_weight >= 0:
            raise InputError(f"grouping.twin_weight must be >= 0, got {self.grouping.twin_weight}")
        if not (self.lr > 0 and 0 <= self.min_lr <= self.lr):
            raise InputError(f"need lr > 0 and 0 <= min_lr <= lr, got lr {self.lr}, min_lr {self.min_lr}")

    @property
    def grid(self) -> int:
        return self.image_size // self.patch_size

    def backbone_config(self) -> Dinov2Config:
        """The HF config every objective trains (so `HookedViT` hooks the result unchanged)."""
        from transformers import Dinov2Config

        return Dinov2Config(
            hidden_size=self.hidden_size,
            num_hidden_layers=self.n_layers,
            num_attention_heads=self.n_heads,
            mlp_ratio=self.mlp_ratio,
            image_size=self.image_size,
            patch_size=self.patch_size,
            layerscale_value=1.0,
            drop_path_rate=0.0,
        )

    @property
    def scenes_seed(self) -> int:
        """The seed of the scenes this recipe trains on (`data_seed`, or drawn from the training seed)."""
        return self.data_seed if self.data_seed is not None else DATA_SEED_BASE + self.seed

    def as_dict(self) -> Json:
        """The recipe as JSON-ready fields, the training scenes' seed resolved (what the card records)."""
        return asdict(self) | {"data_seed": self.scenes_seed}

    @classmethod
    def from_dict(cls, data: Json) -> "ZooRecipe":
        """Inverse of `as_dict` (JSON lists become tuples again); unknown keys are refused."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"unknown recipe field(s) {unknown}; known: {sorted(known)}")
        values = {}
        for key, value in data.items():
            if key in _NESTED:
                sub = {k: tuple(v) if isinstance(v, list) else v for k, v in (value or {}).items()}
                values[key] = _NESTED[key](**sub)
            else:
                values[key] = value
        return cls(**values)

    def with_overrides(self, **overrides: Any) -> "ZooRecipe":
        """A copy with top-level fields replaced (None values are ignored)."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def with_knobs(self, knobs: Mapping[str, Any]) -> "ZooRecipe":
        """A copy with fields named as `flat_fields` names them replaced (`{"dinov2.teacher_temp": 0.04}`,
        `{"warmup_steps": 50}`); an unknown name is refused, naming the known ones of its section."""
        data = self.as_dict()
        known = flat_fields(data)
        for name, value in knobs.items():
            if name not in known or name in ("objective", "scale"):
                section = name.partition(".")[0]
                choices = [k for k in known if k.startswith(section + ".")] or [
                    k for k in known if "." not in k and k not in ("objective", "scale")
                ]
                raise InputError(f"unknown recipe knob {name!r}; known here: {', '.join(choices)}")
            if not _same_kind(value, known[name]):
                raise InputError(f"recipe knob {name} takes a value like {known[name]!r}, got {value!r}")
            section, _, key = name.rpartition(".")
            (data[section] if section else data)[key] = value
        return ZooRecipe.from_dict(data)


_NESTED: dict[str, type] = {
    "dino": DinoKnobs,
    "dinov2": Dinov2Knobs,
    "mae": MaeKnobs,
    "supervised": SupervisedKnobs,
    "grouping": GroupingKnobs,
}
"""The recipe's knob sections, by field name."""


def flat_fields(recipe: Mapping[str, Any]) -> Json:
    """A recipe's JSON fields with its knobs as `dinov2.teacher_temp` (lists as tuples): the names `--knob` and
    the resume check use."""
    flat: Json = {}
    for key, value in recipe.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": tuple(v) if isinstance(v, list) else v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def knob_text(name: str, value: Any) -> str:
    """`--knob NAME=VALUE` as a shell takes it (`parse_knob` reads it back)."""
    return f"--knob {name}={json.dumps(value, separators=(',', ':'))}"


def _same_kind(value: Any, current: Any) -> bool:
    """Whether `value` can stand where `current` is (an int for a float; a list for a tuple of its length)."""
    if current is None or isinstance(current, bool) or isinstance(value, bool):
        return current is None or type(value) is type(current)
    if isinstance(current, float):
        return isinstance(value, (int, float))
    if isinstance(current, tuple):
        return isinstance(value, (list, tuple)) and len(value) == len(current)
    return type(value) is type(current)


def parse_knob(text: str) -> tuple[str, Any]:
    """`"dinov2.teacher_temp=0.04"` -> `("dinov2.teacher_temp", 0.04)`: the value read as JSON (numbers,
    `true`, `[0.1, 0.35]`), else kept as text (`centering=sinkhorn_knopp`)."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise InputError(f"a knob is NAME=VALUE (for example dinov2.teacher_temp=0.04), got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name.strip(), value


def _check_self_distillation(name: str, knobs: DinoKnobs, patch_size: int) -> None:
    """Refuse knobs a DINO or DINOv2 run cannot use, naming the field as `dinov2.mask_ratio`."""
    if knobs.local_size % patch_size:
        raise InputError(f"{name}.local_size {knobs.local_size} must be a multiple of patch_size {patch_size}")
    if knobs.centering not in CENTERINGS:
        raise InputError(f"{name}.centering must be one of {', '.join(CENTERINGS)}, got {knobs.centering!r}")
    if not (knobs.teacher_temp > 0 and knobs.warmup_teacher_temp > 0 and knobs.student_temp > 0):
        raise InputError(f"{name}: temperatures must be positive")
    if not 0 <= knobs.teacher_temp_warmup <= 1:
        raise InputError(
            f"{name}.teacher_temp_warmup is a fraction of the steps in [0, 1], got {knobs.teacher_temp_warmup}"
        )
    if isinstance(knobs, Dinov2Knobs):
        low, high = knobs.mask_ratio
        if not (0 <= knobs.mask_probability <= 1 and 0 <= low <= high < 1):
            raise InputError(
                f"{name}: need 0 <= mask_probability <= 1 and 0 <= mask_ratio low <= high < 1, got "
                f"{knobs.mask_probability} and {knobs.mask_ratio}"
            )


COMMAND_LINE_FIELDS: dict[str, tuple[type, str]] = {
    "steps": (int, "optimizer steps"),
    "batch_size": (int, "scenes per step"),
    "lr": (float, "peak learning rate"),
    "n_scenes": (int, "training scenes rendered"),
    "seed": (int, "initialization and batch-order seed"),
    "init": (str, "a zoo model (zoo:NAME) or checkpoint directory whose weights the run starts from (fine-tuning)"),
    "data_seed": (int, "training scenes' seed, 1 + --seed when not given (every shipped model used 1)"),
    "preset": (str, "scene preset: default | twins | colorshape | matched | balanced | binding"),
    "image_size": (int, "scene side in px"),
    "patch_size": (int, "ViT patch side in px"),
    "hidden_size": (int, "d_model"),
    "n_layers": (int, "transformer blocks"),
    "n_heads": (int, "attention heads"),
}
"""The recipe fields `binding-lens zoo train` takes as --flags (type, help)."""

CHECKPOINT_EVERY = 100
"""Steps between training checkpoints. The shipped CPU recipes take 0.26 to 1.7 s a step (their cards), so
one comes every 0.5 to 3 minutes: 9 to 14 MB written in about 0.2 s. The gpu recipes' are 260 to 390 MB."""
MAX_HOURS = 72.0
"""The longest run trained without asking (`max_hours`, `--max-hours`)."""


SCALES = ("small", "gpu")


def default_recipe(objective: str, scale: str = "small") -> ZooRecipe:
    """The shipped recipe of an objective at a scale (`RECIPES`, `GPU_RECIPES` below), by name."""
    if objective not in RECIPES:
        raise InputError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if scale not in SCALES:
        raise InputError(f"unknown recipe scale {scale!r}; choose one of {', '.join(SCALES)}")
    return (RECIPES if scale == "small" else GPU_RECIPES)[objective]


GROUPING_STEPS = 2400
"""The grouping recipe's steps: about 45 min of one CPU thread (a step of 48 scenes, 24 twin pairs, cost 1.0 to
1.2 s of CPU on one thread of this 2-core machine; the `dinov2` cards record 40 min). Rendering its 6,000
`binding` scenes (half of them mazes) takes about a minute. The card's `cpu_time_s` says what a run used."""

RECIPES: dict[str, ZooRecipe] = {
    "dino": ZooRecipe("dino", steps=1200, lr=5e-4),
    "dinov2": ZooRecipe("dinov2", steps=1200, lr=5e-4),
    "mae": ZooRecipe("mae", steps=3000, lr=1e-3),
    "supervised": ZooRecipe("supervised", steps=2000, lr=1e-3),
    "grouping": ZooRecipe("grouping", preset="binding", steps=GROUPING_STEPS, lr=1e-3),
    "random": ZooRecipe("random", steps=0),
}

_GPU_BACKBONE: Options = dict(
    scale="gpu",
    image_size=128,
    patch_size=8,
    hidden_size=384,
    n_layers=12,
    n_heads=6,
    n_scenes=20000,
    batch_size=128,
    warmup_steps=500,
)
GPU_RECIPES: dict[str, ZooRecipe] = {
    "dino": ZooRecipe(
        "dino",
        **_GPU_BACKBONE,
        steps=10000,
        lr=5e-4,
        dino=DinoKnobs(out_dim=4096, hidden_dim=1024, bottleneck_dim=256, local_size=64),
    ),
    "dinov2": ZooRecipe(
        "dinov2",
        **_GPU_BACKBONE,
        steps=10000,
        lr=5e-4,
        dinov2=Dinov2Knobs(out_dim=4096, patch_out_dim=4096, hidden_dim=1024, bottleneck_dim=256, local_size=64),
    ),
    "mae": ZooRecipe(
        "mae", **_GPU_BACKBONE, steps=20000, lr=1e-3, mae=MaeKnobs(decoder_dim=192, decoder_layers=4, decoder_heads=6)
    ),
    "supervised": ZooRecipe("supervised", **_GPU_BACKBONE, steps=15000, lr=1e-3),
    "grouping": ZooRecipe("grouping", **_GPU_BACKBONE, preset="binding", steps=15000, lr=1e-3),
    "random": ZooRecipe("random", **{**_GPU_BACKBONE, "warmup_steps": 100}, steps=0),
}
"""A ViT-S-sized backbone (d 384, 12 blocks, 6 heads) on 128 px scenes (a 16 x 16 grid), meant for one
GPU with `--device cuda --precision bf16`: 1.3M to 2.6M training images per model. Not trained here
(no GPU was at hand); its code path is tested for a few steps on the CPU."""
