"""Batched extraction of patch-token activations, with their labels, into a resumable store.

One forward pass per batch captures every requested layer (`blocks.{l}.hook_resid_post`, i.e. HF
`hidden_states[l+1]`) and stops after the last one needed. Per image either every patch token is
kept, or `patches_per_image` labelled patches drawn with a seed of (seed, image index), so a
store is the same whatever the batch size or the order shards were written in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data import (
    Scene,
    SkipReport,
    patch_labels,
    resize_image,
    sample_patch_slots,
    unusable_reason,
)
from ..errors import InputError
from ..hooks import HookedViT
from ..hooks.images import check_image_size
from ..hooks.names import LAYER_CONVENTION, resid_post
from ..io import write_json_atomic
from ..version import __version__
from .store import (
    FORMAT_VERSION,
    MANIFEST,
    ActivationStore,
    Shard,
    StoreError,
    write_shard,
)


def weights_fingerprint(model: HookedViT) -> str:
    """A cheap hash of the weights (name, shape, sum and sum of squares of every parameter)."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, param in model.hf_model.named_parameters():
            p = param.detach().double()
            digest.update(f"{name}{tuple(p.shape)}{p.sum().item():.6e}{p.square().sum().item():.6e}".encode())
    return digest.hexdigest()[:16]


def _target_size(scene: Scene | None, size: int | tuple[int, int] | None) -> tuple[int, int]:
    """(height, width) fed to the model: `size`, or the scene's own when `size` is None."""
    if size is None:
        return scene.hw
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def _choose_slots(instance: np.ndarray, patches_per_image: int | None, seed: int, image_index: int) -> np.ndarray:
    """Flat patch indices to store: all patches, or a sample of labelled ones (sorted) drawn with a
    generator seeded by (seed, image index), so a store does not depend on batch size or shard order."""
    if patches_per_image is None:
        return np.arange(instance.size)
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, image_index]).generate_state(1)[0]))
    slots, valid = sample_patch_slots(torch.as_tensor(instance.reshape(1, -1)), patches_per_image, generator)
    return slots[valid].numpy()


def build_manifest(
    model: HookedViT, dataset: Sequence[Scene], request: dict[str, Any], n_shards: int, dataset_identity: Any
) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "request": request,
        "n_images": len(dataset),
        "n_shards": n_shards,
        "model_config": model.cfg.to_dict(),
        "dataset": dataset_identity,
        "package_version": __version__,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


_ABSENT = object()  # a field one side of a comparison lacks


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{'dataset.size': 224, ...}: nested dicts as dotted paths."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, item in value.items():
        flat |= _flatten(item, f"{prefix}.{key}" if prefix else str(key))
    return flat


def _short(value: Any) -> str:
    if value is _ABSENT:
        return "absent"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def request_differences(stored: dict[str, Any], requested: dict[str, Any], budget: int = 160) -> str:
    """'dataset.size: stored 224, requested 112; ...': only the fields that differ, as dotted paths, values
    shortened; fields both sides hold come first; about `budget` characters, then 'and N more'."""
    old, new = _flatten(stored), _flatten(requested)
    keys = sorted((k for k in old.keys() | new.keys() if old.get(k, _ABSENT) != new.get(k, _ABSENT)),
                  key=lambda k: (k not in old or k not in new, k))
    parts: list[str] = []
    for key in keys:
        part = f"{key}: stored {_short(old.get(key, _ABSENT))}, requested {_short(new.get(key, _ABSENT))}"
        if parts and len("; ".join(parts + [part])) > budget:
            break
        parts.append(part)
    more = len(keys) - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more else "")


def _as_json(request: dict[str, Any]) -> dict[str, Any]:
    """The request as the manifest will hold it (tuples as lists, keys as strings), so a re-run compares
    equal to what it wrote; a dataset identity that is not JSON fails here, before any image is read."""
    try:
        return json.loads(json.dumps(request, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise InputError(f"cannot record this extraction in manifest.json ({error}): the dataset identity and "
                         "settings must be dicts, lists, strings and finite numbers") from None


def _open(out: Path, manifest: dict[str, Any]) -> ActivationStore | None:
    """The store at `out` if it was made with this request; None when there is none yet (the manifest is
    written with the first shard, so a run that fails before it pins nothing). A store with other
    settings is refused, naming the fields that differ, unless it holds no finished shard; so is an
    unreadable manifest beside shard records."""
    if not (out / MANIFEST).is_file():
        return None
    try:
        store = ActivationStore(out)
    except StoreError:  # unreadable or of another format version: it pins nothing if no shard was recorded
        if any((out / "shards").glob("shard-*.json")):
            raise
        return None
    stored = store.manifest.get("request")
    if stored == manifest["request"]:
        return store
    if any(store.shard_state(i, verify=False) == "done" for i in range(store.n_shards)):
        raise StoreError(
            f"{out} holds activations extracted with other settings "
            f"({request_differences(stored if isinstance(stored, dict) else {}, manifest['request'])}). "
            "Use another output directory (--out), or delete this one to extract again."
        )
    return None  # a manifest with no finished shard pins nothing: it is rewritten with the first shard


def checked_layers(layers: Sequence[int], n_layers: int) -> list[int]:
    """`layers` sorted and deduplicated, or an InputError when one lies outside 0..n_layers - 1 or none is given."""
    layers = sorted({int(layer) for layer in layers})
    if not layers or any(not 0 <= layer < n_layers for layer in layers):
        raise InputError(f"layers must be in 0..{n_layers - 1} for this model, got {layers or 'none'}")
    return layers


def extract(
    model: HookedViT,
    dataset: Sequence[Scene],
    layers: Sequence[int],
    out: str | Path,
    *,
    dtype: torch.dtype = torch.float16,
    patches_per_image: int | None = 64,
    batch_size: int = 16,
    device: str | torch.device | None = None,
    size: int | tuple[int, int] | None = None,
    purity: float | None = None,
    seed: int = 0,
    shard_size: int = 256,
    dataset_identity: Any = None,
    autocast: bool = True,
    progress: bool = True,
) -> ActivationStore:
    """Extract patch-token activations of `layers` for every usable image of `dataset` into `out`.

    Images are fed whole (resized to `size` if given, position embeddings interpolated); labels come
    from the plurality vote of the original masks over the same patch grid. Images with no labelled
    patch or a single object are skipped, counted per reason in the shard records. Finished shards
    of an earlier run with the same settings are kept (corrupt ones recomputed, with a warning); other
    settings raise `StoreError` naming the fields that differ. Nothing is written before the first
    shard is computed, so a run that fails on its first images leaves nothing that blocks the next.
    """
    out = Path(out)
    layers = checked_layers(layers, model.cfg.n_layers)
    if patches_per_image is not None and patches_per_image < 2:
        raise InputError(f"patches_per_image must be >= 2 (pairs need two patches) or None for all, got {patches_per_image}")
    identity = dataset_identity if dataset_identity is not None else getattr(dataset, "identity", None)
    if identity is None:
        raise InputError(
            "the dataset has no `identity` to record in the manifest: pass dataset_identity={...} naming what it is"
        )
    if size is not None:  # checked before any image is read: a wrong size fails at once, not mid-shard
        check_image_size(*_target_size(None, size), model.cfg.patch_size)
    device = torch.device(device) if device is not None else model.device
    model = model.to(device).eval()
    request = _as_json({
        "model": {"source": model.cfg.source, "revision": model.cfg.extra.get("revision"), "family": model.cfg.family,
                  "model_type": model.cfg.model_type, "weights": weights_fingerprint(model)},
        "preprocessing": {"image_mean": list(model.cfg.image_mean), "image_std": list(model.cfg.image_std),
                          "size": size if size is None or isinstance(size, int) else list(size)},
        "patch_coverage": "whole image at once, position embeddings interpolated to its patch grid",
        "layer_convention": LAYER_CONVENTION,
        "layers": layers,
        "dataset": identity,
        "n_images": len(dataset),
        "dtype": str(dtype).removeprefix("torch."),
        "patches_per_image": patches_per_image,
        "purity": purity,
        "seed": seed,
        "shard_size": shard_size,
    })
    n_shards = max(1, -(-len(dataset) // shard_size))
    manifest = build_manifest(model, dataset, request, n_shards, request["dataset"])
    store = _open(out, manifest)
    todo = _shards_to_do(store, n_shards)
    if patches_per_image is None:
        first = _target_size(dataset[0], size)
        n_slots = (first[0] // model.cfg.patch_size) * (first[1] // model.cfg.patch_size)
    else:
        n_slots = patches_per_image
    fused_before = model.cfg.fused_attention
    model.set_fused_attention(True)  # only the residual stream is read: the fused kernel gives the same values
    bar = tqdm(total=sum(min(shard_size, len(dataset) - i * shard_size) for i in todo), unit="img",
               desc=f"extract {model.cfg.source}", disable=not progress)
    try:
        for index in todo:
            start, stop = index * shard_size, min((index + 1) * shard_size, len(dataset))
            shard, record = _extract_shard(
                model, dataset, range(start, stop), layers, device, dtype=dtype, patches_per_image=patches_per_image,
                n_slots=n_slots, batch_size=batch_size, size=size, purity=purity, seed=seed, autocast=autocast, bar=bar,
            )
            if store is None:
                write_json_atomic(out / MANIFEST, manifest)
                store = ActivationStore(out)
            write_shard(out, index, shard, record)
    finally:
        model.set_fused_attention(fused_before)
        bar.close()
    return store if store is not None else ActivationStore(out)


def _shards_to_do(store: ActivationStore | None, n_shards: int) -> list[int]:
    """The shards to (re)compute: all without a store, else the missing and corrupt ones (with a warning
    naming each corrupt file)."""
    if store is None:
        return list(range(n_shards))
    problems = store.problems()
    for problem in problems:
        if problem.state == "corrupt":
            warnings.warn(f"{problem.describe()}: recomputing shard {problem.index}", stacklevel=3)
    return [problem.index for problem in problems]


def _extract_shard(
    model: HookedViT, dataset: Sequence[Scene], indices: range, layers: list[int], device: torch.device, *,
    dtype: torch.dtype, patches_per_image: int | None, n_slots: int, batch_size: int, size: Any,
    purity: float | None, seed: int, autocast: bool, bar: tqdm,
) -> tuple[Shard, dict[str, Any]]:
    """Activations and labels of the usable images among `indices`, in `n_slots` slots per image."""
    n_prefix, patch, d_model = model.cfg.n_prefix_tokens, model.cfg.patch_size, model.cfg.d_model
    names = [resid_post(layer) for layer in layers]
    skips = SkipReport()
    skipped: dict[str, str] = {}
    slots_rows: list[np.ndarray] = []
    instance_rows: list[np.ndarray] = []
    class_rows: list[np.ndarray] = []
    kept: list[int] = []
    acts: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}

    def run(batch: list[tuple[int, Scene, tuple[int, int], np.ndarray]]) -> None:
        pixels = model.preprocess([resize_image(scene.image, hw) for _, scene, hw, _ in batch])
        gather = torch.as_tensor(np.stack([slots for *_, slots in batch]), device=device)
        use_autocast = autocast and device.type == "cuda"
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_autocast):
            _, cache = model.run_with_cache(pixels, names_filter=names, stop_at_layer=layers[-1] + 1)
        index = (gather.clamp(min=0) + n_prefix).unsqueeze(-1).expand(-1, -1, d_model)
        empty = (gather < 0).unsqueeze(-1)
        for layer, name in zip(layers, names):
            tokens = cache[name].gather(1, index).masked_fill(empty, 0).to(dtype)
            acts[layer].append(tokens.to("cpu", non_blocking=True))
        bar.update(len(batch))

    pending: list[tuple[int, Scene, tuple[int, int], np.ndarray]] = []
    for image_index in indices:
        scene = dataset[image_index]
        hw = _target_size(scene, size)
        grid = (hw[0] // patch, hw[1] // patch)
        labels = patch_labels(scene.instance_mask, scene.class_mask, grid=grid, purity=purity)
        reason = unusable_reason(labels)
        if reason is not None:
            skips.skip(image_index, reason)
            skipped[str(image_index)] = reason
            bar.update(1)
            continue
        if patches_per_image is None and grid[0] * grid[1] != n_slots:
            raise InputError(
                f"image {image_index} gives a {grid[0]}x{grid[1]} patch grid, unlike the first image's {n_slots} "
                "patches: pass size=... so all images share one grid, or patches_per_image=k to store k of each"
            )
        skips.keep()
        valid = labels.valid.reshape(-1)
        chosen = _choose_slots(np.where(valid, labels.instance.reshape(-1), -1), patches_per_image, seed, image_index)
        slots = np.full(n_slots, -1, np.int64)
        slots[: chosen.size] = chosen
        instance = np.full(n_slots, -1, np.int64)
        klass = np.full(n_slots, -1, np.int64)
        instance[: chosen.size] = np.where(valid[chosen], labels.instance.reshape(-1)[chosen], -1)
        klass[: chosen.size] = np.where(valid[chosen], labels.classes.reshape(-1)[chosen], -1)
        kept.append(image_index)
        slots_rows.append(slots)
        instance_rows.append(instance)
        class_rows.append(klass)
        if pending and (len(pending) == batch_size or pending[0][2] != hw):
            run(pending)
            pending = []
        pending.append((image_index, scene, hw, slots))
    if pending:
        run(pending)
    if device.type == "cuda":
        torch.cuda.synchronize()

    def stacked(rows: list[np.ndarray]) -> torch.Tensor:
        return torch.as_tensor(np.stack(rows)) if rows else torch.zeros(0, n_slots, dtype=torch.int64)

    shard = Shard(
        acts={layer: torch.cat(parts) if parts else torch.zeros(0, n_slots, d_model, dtype=dtype)
              for layer, parts in acts.items()},
        instance=stacked(instance_rows), klass=stacked(class_rows), patch_index=stacked(slots_rows),
        image_index=torch.as_tensor(kept, dtype=torch.int64),
    )
    record = {"images": [indices.start, indices.stop], "kept": len(kept), "skipped": skipped,
              "skip_summary": skips.summary()}
    return shard, record
