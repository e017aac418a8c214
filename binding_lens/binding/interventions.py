"""Live interventions on binding vectors, mid-forward (method notes section 6).

Each intervention edits the binding part c(h) = Q Q^T h of patch tokens (never CLS or registers)
at one hook point (by default a layer's residual stream; `.at("blocks.3.hook_attn_out")` takes any
[batch pos d_model] hook point), and is a TransformerLens hook function:

    sub = BindingSubspace.from_probe(probe, k=16)
    n_prefix = model.cfg.n_prefix_tokens
    model.run_with_hooks(pixels, fwd_hooks=[Shuffle(sub, 0.5, n_prefix, seed=0).at(8)])
    with model.hooks(fwd_hooks=[Inject(sub, 0.0, n_prefix, instance).at(8), ProjectOut(sub, n_prefix).at(9)]):
        ...                                                       # several layers compose

and an nnsight edit (`.apply` takes and returns the tensor):

    traced = NNsight(model)
    with traced.trace(pixels):
        out = traced.blocks[8].hook_resid_post.output
        traced.blocks[8].hook_resid_post.output = Shuffle(sub, 1.0, n_prefix).apply(out)

Exact identities return the input tensor itself, so outputs stay bit-identical: ratio 0 (or fewer
than 2 patches drawn), alpha 1, and k = 0.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..data.sampling import dense_instance_ids
from ..errors import InputError
from ..hooks.names import resid_post
from ..hooks.replacement import Reference, check_replacement, replaced
from ..probes import PairProbe
from .subspace import BindingSubspace


class Intervention(ABC):
    """An edit of the binding parts of patch tokens; call it as a hook or use `.apply(h)`."""

    def __init__(self, subspace: BindingSubspace, n_prefix: int):
        if n_prefix < 0:
            raise InputError(f"n_prefix (CLS + register tokens) must be >= 0, got {n_prefix}")
        self.subspace = subspace
        self.n_prefix = n_prefix

    def __call__(self, tensor: Float[Tensor, "batch pos d_model"], hook=None) -> Float[Tensor, "batch pos d_model"]:
        return self.apply(tensor)

    def at(self, hook: int | str) -> tuple[str, "Intervention"]:
        """(hook name, self) for `fwd_hooks`. An int l means layer l's residual stream
        (`blocks.{l}.hook_resid_post`); a string is any hook point whose activation is
        [batch pos d_model] (`blocks.3.hook_resid_mid`, `blocks.3.hook_attn_out`, `hook_embed`, ...),
        checked by the model when the hook is added."""
        if isinstance(hook, bool) or not isinstance(hook, (int, str)):
            raise TypeError(f"at() takes a layer index or a hook name, got {hook!r}")
        return (resid_post(hook) if isinstance(hook, int) else hook), self

    def save_pretrained(self, folder: str | Path, **card: Any) -> Path:
        """Write the edit, its subspace and their card (`model`, `data`, `metrics`:
        `binding.sharing.save_intervention`); `Inject` and `Interchange` read data and are refused."""
        from .sharing import save_intervention

        return save_intervention(self, folder, **card)

    @staticmethod
    def from_pretrained(
        source: str | Path, model: Any = None, layer: int | None = None, **options: Any
    ) -> "Intervention":
        """A saved edit (of the class its card names) from a folder or hub id, checked against `model` at `layer`
        when given (`binding.sharing.load_intervention`)."""
        from .sharing import load_intervention

        return load_intervention(source, model, layer, **options)

    def push_to_hub(self, repo_id: str, **options: Any) -> str:
        """Upload the saved folder to a hub repository (`binding.sharing.push_intervention_to_hub`)."""
        from .sharing import push_intervention_to_hub

        return push_intervention_to_hub(self, repo_id, **options)

    def apply(self, h: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        if h.ndim != 3:
            raise InputError(f"expected activations [batch, pos, d_model], got shape {tuple(h.shape)}")
        if h.shape[-1] != self.subspace.d_model:
            raise InputError(
                f"the binding subspace lives in {self.subspace.d_model} dimensions but this hook's tokens have "
                f"{h.shape[-1]}: build the subspace from a probe fitted on this model"
            )
        if self.subspace.k == 0 or self.is_identity():
            return h
        patches = h[:, self.n_prefix :]
        edited = self.edit_patches(patches)
        if edited is patches:
            return h
        return torch.cat([h[:, : self.n_prefix], edited], dim=1)

    def is_identity(self) -> bool:
        return False

    @abstractmethod
    def edit_patches(self, patches: Float[Tensor, "batch n d_model"]) -> Float[Tensor, "batch n d_model"]:
        """The edited patch tokens (or `patches` itself when nothing changes)."""

    def _replace_binding(self, patches: Tensor, new_binding: Tensor) -> Tensor:
        return patches - self.subspace.binding_part(patches) + new_binding


def _unit_interval(what: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise InputError(f"{what} must be in [0, 1], got {value}")
    return float(value)


class Shuffle(Intervention):
    """Uninformed: pick round(ratio * N) patches per image at random and permute their binding parts
    among themselves: h_i' = h_i - c(h_i) + c(h_pi(i)). Seeded: the same draw on every forward."""

    def __init__(self, subspace: BindingSubspace, ratio: float, n_prefix: int, seed: int = 0):
        super().__init__(subspace, n_prefix)
        self.ratio, self.seed = _unit_interval("shuffle ratio", ratio), seed

    def is_identity(self) -> bool:
        return self.ratio == 0.0

    def draw(self, batch: int, n: int) -> tuple[Int[Tensor, "batch m"], Int[Tensor, "batch m"]]:
        """(chosen patches, the patch each takes its binding part from), per image."""
        m = round(self.ratio * n)
        generator = torch.Generator().manual_seed(self.seed)
        chosen = torch.rand(batch, n, generator=generator).argsort(-1)[:, :m]
        permutation = torch.rand(batch, m, generator=generator).argsort(-1)
        return chosen, chosen.gather(1, permutation)

    def edit_patches(self, patches: Tensor) -> Tensor:
        batch, n, d = patches.shape
        chosen, source = self.draw(batch, n)
        if chosen.shape[1] < 2:
            return patches
        chosen, source = chosen.to(patches.device), source.to(patches.device)
        binding = self.subspace.binding_part(patches)
        take = lambda t, index: t.gather(1, index[..., None].expand(-1, -1, d))  # noqa: E731
        new_rows = take(patches, chosen) - take(binding, chosen) + take(binding, source)
        return patches.scatter(1, chosen[..., None].expand(-1, -1, d), new_rows)


class Inject(Intervention):
    """Informed: move each labeled patch's binding part toward its object's mean,
    c_i' = alpha c_i + (1 - alpha) mean_{j in o(i)} c_j. `instance` [batch, n_patches] holds object ids
    in patch order (< 0: unlabeled, left untouched). Undefined on crops whose labels are unknown."""

    def __init__(self, subspace: BindingSubspace, alpha: float, n_prefix: int, instance: Int[Tensor, "batch n"]):
        super().__init__(subspace, n_prefix)
        self.alpha, self.instance = _unit_interval("inject alpha", alpha), instance

    def is_identity(self) -> bool:
        return self.alpha == 1.0

    def edit_patches(self, patches: Tensor) -> Tensor:
        batch, n, d = patches.shape
        if tuple(self.instance.shape) != (batch, n):
            raise InputError(
                f"instance labels are {tuple(self.instance.shape)} but the layer has {batch} images x {n} patch "
                "tokens: pass one label per patch token, in row-major patch order"
            )
        dense = dense_instance_ids(self.instance.to(patches.device).long())
        labeled = dense >= 0
        slot = dense + 1  # slot 0 collects the unlabeled patches; object means come from one scatter-add
        n_slots = int(slot.max()) + 1
        binding = self.subspace.binding_part(patches)
        sums = binding.new_zeros(batch, n_slots, d).scatter_add(1, slot[..., None].expand(-1, -1, d), binding)
        counts = binding.new_zeros(batch, n_slots).scatter_add(1, slot, torch.ones_like(slot, dtype=binding.dtype))
        means = (sums / counts.clamp(min=1)[..., None]).gather(1, slot[..., None].expand(-1, -1, d))
        new_binding = self.alpha * binding + (1 - self.alpha) * means
        edited = self._replace_binding(patches, new_binding)
        return torch.where(labeled[..., None], edited, patches)


class InjectByProbe(Intervention):
    """Informed by the model, not by the labels: move each patch's binding part toward the mean of the binding
    parts of the patches the probe groups it with, c_i' = alpha c_i + (1 - alpha) sum_j w_ij c_j / sum_j w_ij,
    where w_ij is the probe's P(same object) for patches i and j at this layer (w_ii = 1). `Inject` writes the
    ground-truth objects' means, so part of what it does is hand the labels to the model; this variant uses
    only what the model's own tokens (read by the probe) say. Every patch is edited (no labels are needed)."""

    def __init__(self, subspace: BindingSubspace, alpha: float, n_prefix: int, probe: PairProbe):
        super().__init__(subspace, n_prefix)
        if probe.d_model != subspace.d_model:
            raise InputError(f"the probe reads d_model {probe.d_model}, the subspace lives in {subspace.d_model}")
        self.alpha, self.probe = _unit_interval("inject alpha", alpha), probe

    def is_identity(self) -> bool:
        return self.alpha == 1.0

    def edit_patches(self, patches: Tensor) -> Tensor:
        with torch.no_grad():
            probe = self.probe.to(patches.device)
            weights = probe.scores_to_probabilities(probe.pair_scores(patches.to(next(probe.parameters()).dtype)))
        eye = torch.eye(patches.shape[1], dtype=torch.bool, device=patches.device)
        weights = torch.where(eye, torch.ones_like(weights), weights).to(patches.dtype)
        binding = self.subspace.binding_part(patches)
        means = weights @ binding / weights.sum(-1, keepdim=True)
        return self._replace_binding(patches, self.alpha * binding + (1 - self.alpha) * means)


class ProjectOut(Intervention):
    """Remove the binding part of every patch token: h' = f(h) = h - c(h)."""

    def edit_patches(self, patches: Tensor) -> Tensor:
        return self.subspace.feature_part(patches)


class MeanAblate(Intervention):
    """Replace every patch's binding part by the mean binding part of a reference set: h' = f(h) + c(mean h)."""

    def __init__(self, subspace: BindingSubspace, n_prefix: int, mean: Float[Tensor, " d_model"]):
        super().__init__(subspace, n_prefix)
        if mean.shape != (subspace.d_model,):
            raise InputError(f"mean must be a [{subspace.d_model}] vector (mean patch token), got {tuple(mean.shape)}")
        self.mean = mean

    def edit_patches(self, patches: Tensor) -> Tensor:
        return self._replace_binding(patches, self.subspace.binding_part(self.mean.to(patches))[None, None])


class Replace(Intervention):
    """Remove the binding part of every patch token and put its replacement in (`hooks.replacement`):
    h' = f(h) + Q r, with r = 0 ("zero", as `ProjectOut`), the reference's mean coordinates at that patch
    position ("mean"), that mean plus Gaussian noise of the reference's spread ("noise"), or the coordinates of
    the same position in a reference image drawn at random ("resample"; never the image's own when `images`,
    the batch's image ids, and `reference_images`, the reference's, are given). `reference`: patch tokens
    [image, n, d_model] of other images at the same hook. Seeded: the same draws on every forward."""

    def __init__(
        self,
        subspace: BindingSubspace,
        n_prefix: int,
        mode: str = "zero",
        reference: Float[Tensor, "image n d_model"] | None = None,
        *,
        seed: int = 0,
        images: Int[Tensor, " batch"] | None = None,
        reference_images: Int[Tensor, " image"] | None = None,
    ):
        super().__init__(subspace, n_prefix)
        self.reference = None if reference is None else Reference.of(subspace.coordinates(reference.float().cpu()))
        self.mode = check_replacement(mode, self.reference)
        self.seed, self.images, self.reference_images = seed, images, reference_images

    def edit_patches(self, patches: Tensor) -> Tensor:
        coordinates = self.subspace.coordinates(patches)
        generator = torch.Generator().manual_seed(self.seed)
        new = replaced(coordinates, self.mode, self.reference, generator, self.images, self.reference_images)
        return self._replace_binding(patches, new @ self.subspace.basis.to(patches).T)


class Interchange(Intervention):
    """Activation patching in the binding subspace: each patch takes the binding part of the same patch
    position in `source` (the same layer's residual stream on other images): h' = f(h) + c(h_source)."""

    def __init__(self, subspace: BindingSubspace, n_prefix: int, source: Float[Tensor, "batch pos d_model"]):
        super().__init__(subspace, n_prefix)
        self.source = source

    def edit_patches(self, patches: Tensor) -> Tensor:
        source = self.source[:, self.n_prefix :].to(patches)
        if source.shape != patches.shape:
            raise InputError(
                f"source activations give {tuple(source.shape)} patch tokens, the layer has {tuple(patches.shape)}: "
                "record the source at the same layer, with the same batch size and image size"
            )
        return self._replace_binding(patches, self.subspace.binding_part(source))


class Dose(Intervention):
    """Another intervention at a strength s in [0, 1]: h' = h + s (edit(h) - h), the edited and the clean
    binding coordinates mixed (every edit here changes only those), s = 0 the clean run and s = 1 the full
    edit. A dose-response curve (s = 0, 0.25, ..., 1) should rise steadily for the binding subspace and stay
    flat for a random one of the same energy: an effect that jumps, or moves as much for the control, is not
    the subspace's."""

    def __init__(self, edit: Intervention, strength: float):
        super().__init__(edit.subspace, edit.n_prefix)
        self.edit, self.strength = edit, _unit_interval("dose strength", strength)

    def is_identity(self) -> bool:
        return self.strength == 0.0 or self.edit.is_identity()

    def edit_patches(self, patches: Tensor) -> Tensor:
        edited = self.edit.edit_patches(patches)
        if edited is patches or self.strength == 1.0:
            return edited
        return patches + self.strength * (edited - patches)
