"""The viewer's data: a JSON metadata object plus one base64 blob per map, at a given bit depth.

Metadata keys (read by the page script):
    display      the side (px) of the box each image is drawn to fit
    images[i]    {name, src (PNG data URL), width, height, outline (PNG data URL or null)}
    models[m]    {name, nLayers, grids [[rows, cols] per image], truth [ids per patch | null per image],
                  probes {probe: [layers]}, relation {name, title, readout}}
    scores       {"m|i|probe|layer": blob id}     the probes' pair probabilities at layer `layer`
    attention    {"m|i|block": blob id}           attention of block `block` (the viewer shows l+1)
    blobs        {blob id: layout}                see `encoding.layout`
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...errors import InputError
from ...io.documents import Json
from ...probes.relations import RELATIONS, decoded
from .encoding import Quantized, encode, layout
from .images import outline_data_url, png_data_url
from .maps import ModelMaps, ViewerImage

FORMAT = 1


def score_key(model: int, image: int, probe: str, layer: int) -> str:
    return f"{model}|{image}|{probe}|{layer}"


def attention_key(model: int, image: int, block: int) -> str:
    return f"{model}|{image}|{block}"


def image_entry(image: ViewerImage) -> Json:
    h, w = image.rgb.shape[:2]
    if image.outline is not None and image.outline.shape != (h, w):
        raise InputError(f"outline of {image.name!r} is {image.outline.shape}, its image {h}x{w}")
    return {
        "name": image.name,
        "src": png_data_url(image.rgb),
        "width": w,
        "height": h,
        "outline": None if image.outline is None else outline_data_url(image.outline),
    }


def build_payload(
    images: Sequence[ViewerImage],
    models: Sequence[ModelMaps],
    bits: int,
    title: str,
    image_entries: list[Json] | None = None,
    display_px: int = 448,
) -> tuple[Json, dict[str, str]]:
    """(metadata, {blob id: base64 text}) of every map encoded at `bits` bits; images are drawn to fit
    `display_px`. `image_entries` reuses already encoded images (they do not depend on `bits`)."""
    if not images:
        raise InputError("a viewer needs at least one image")
    if not models:
        raise InputError("a viewer needs at least one model")
    queue: list[Quantized] = []
    layouts: dict[str, Json] = {}

    def add(q: Quantized) -> str:
        blob_id = f"b{len(queue)}"
        queue.append(q)
        layouts[blob_id] = layout(q, bits)
        return blob_id

    meta: Json = {
        "format": FORMAT,
        "title": title,
        "bits": bits,
        "display": display_px,
        "images": image_entries if image_entries is not None else [image_entry(image) for image in images],
        "models": [],
        "scores": {},
        "attention": {},
        "blobs": layouts,
    }
    for m, maps in enumerate(models):
        maps.check(len(images))
        meta["models"].append(
            {
                "name": maps.name,
                "nLayers": maps.n_layers,
                "grids": [list(g) for g in maps.grids],
                "truth": [None if t is None else [int(x) for x in t] for t in maps.truth],
                "probes": maps.probe_layers(),
                "relation": {
                    "name": maps.relation,
                    "title": decoded(maps.relation),
                    "readout": RELATIONS[maps.relation].readout,
                },
            }
        )
        for (probe, image, layer), q in maps.scores.items():
            meta["scores"][score_key(m, image, probe, layer)] = add(q)
        for (image, block), q in maps.attention.items():
            meta["attention"][attention_key(m, image, block)] = add(q)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:  # zlib releases the GIL
        texts = list(pool.map(lambda q: base64.b64encode(encode(q, bits)).decode("ascii"), queue))
    return meta, dict(zip(layouts, texts))


def all_maps(models: Sequence[ModelMaps]) -> list[Quantized]:
    return [q for maps in models for q in (*maps.scores.values(), *maps.attention.values())]


def estimate_map_bytes(models: Sequence[ModelMaps], bits: int, sample: int = 8) -> float:
    """Base64 bytes of every map at `bits`, extrapolated from `sample` maps spread evenly over all of them:
    a cheap first guess of the bit depth that fits a size budget."""
    maps = all_maps(models)
    if not maps:
        return 0.0
    picked = sorted({round(i) for i in np.linspace(0, len(maps) - 1, min(sample, len(maps)))})
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        sizes = list(pool.map(lambda i: len(encode(maps[i], bits)), picked))
    return sum(sizes) * len(maps) / len(picked) * 4 / 3
