"""Object textures and scene backgrounds.

Textures make the patches of one object differ locally (a probe cannot match patches
by pixel equality); backgrounds decide how easy figure/ground is. Everything is drawn
from an explicit numpy Generator, so a scene is a pure function of its seed.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, UInt8
from PIL import Image

from ..errors import InputError
from ..io.documents import Json

TEXTURES = ("none", "stripes", "checks", "noise", "mixed")
"""Object texture kinds; `mixed` draws stripes, checks or noise per object."""

BACKGROUNDS = ("flat", "noise", "stripes")
"""Background kinds (unlabeled clutter blobs are a separate knob)."""


def smooth_noise(
    rng: np.random.Generator, hw: tuple[int, int], cell: int, channels: int = 1
) -> Float[np.ndarray, "height width channels"]:
    """Band-limited noise in [-1, 1]: a coarse random grid (one value per `cell` px) upsampled bilinearly."""
    h, w = hw
    gh, gw = max(2, -(-h // cell) + 1), max(2, -(-w // cell) + 1)
    coarse = rng.integers(0, 256, size=(gh, gw, channels), dtype=np.uint8)
    planes = [
        np.asarray(Image.fromarray(coarse[..., c]).resize((w, h), Image.Resampling.BILINEAR)) for c in range(channels)
    ]
    out = np.stack(planes, axis=-1).astype(np.float32)
    out *= np.float32(2.0 / 255.0)
    out -= np.float32(1.0)
    return out


def sample_texture(rng: np.random.Generator, kind: str, side: int) -> Json:
    """Draw the parameters of one object's texture (kind, period, orientation, phase, noise seed).

    The returned dict is all that `texture_field` needs, so copying it copies the texture
    exactly (twins), and changing only `phase`/`seed` gives a same-looking distractor.
    """
    if kind == "mixed":
        kind = ("stripes", "checks", "noise")[int(rng.integers(0, 3))]
    return {
        "kind": kind,
        "period": float(rng.uniform(0.18, 0.32) * side),
        "angle": float(rng.uniform(0.0, np.pi)),
        "phase": float(rng.uniform(0.0, 2.0 * np.pi)),
        "seed": int(rng.integers(0, 2**31 - 1)),
    }


def rephase(texture: Json, rng: np.random.Generator) -> Json:
    """Same texture kind, period and orientation with a new phase and noise seed."""
    out = dict(texture)
    out["phase"] = float(rng.uniform(0.0, 2.0 * np.pi))
    out["seed"] = int(rng.integers(0, 2**31 - 1))
    return out


def texture_field(texture: Json, side: int) -> Float[np.ndarray, "side side"]:
    """Texture values in [-1, 1] on a side x side sprite (0 everywhere for kind `none`)."""
    kind = texture["kind"]
    if kind == "none":
        return np.zeros((side, side), dtype=np.float32)
    if kind == "noise":
        cell = max(3, int(round(texture["period"] / 2)))
        return smooth_noise(np.random.default_rng(texture["seed"]), (side, side), cell)[..., 0]
    y, x = np.mgrid[0:side, 0:side].astype(np.float32)
    a, k = texture["angle"], np.float32(2.0 * np.pi / texture["period"])
    along = x * np.float32(np.cos(a)) + y * np.float32(np.sin(a))
    if kind == "stripes":
        return np.sign(np.sin(k * along + np.float32(texture["phase"]))).astype(np.float32)
    if kind == "checks":
        across = -x * np.float32(np.sin(a)) + y * np.float32(np.cos(a))
        s = np.sin(k * along + np.float32(texture["phase"])) * np.sin(k * across + np.float32(texture["phase"]))
        return np.sign(s).astype(np.float32)
    raise InputError(f"unknown texture {kind!r}; valid textures: {', '.join(TEXTURES)}")


def paint(
    rgb: tuple[int, int, int], field: Float[np.ndarray, "side side"], contrast: float
) -> UInt8[np.ndarray, "side side 3"]:
    """Color a sprite: base color plus `contrast` gray levels times the texture field."""
    out = np.float32(contrast) * field[..., None] + np.asarray(rgb, dtype=np.float32)
    np.clip(out, 0.0, 255.0, out=out)
    return out.astype(np.uint8)


def background(rng: np.random.Generator, kind: str, hw: tuple[int, int]) -> UInt8[np.ndarray, "height width 3"]:
    """A neutral mid-dark background: flat, smooth color noise, or faint stripes."""
    h, w = hw
    base = rng.uniform(60, 120) + rng.uniform(-12, 12, size=3)
    if kind == "flat":
        return np.broadcast_to(np.clip(base, 0, 255).astype(np.uint8), (h, w, 3)).copy()
    if kind == "noise":
        cell = int(rng.integers(8, 20))
        gh, gw = max(2, -(-h // cell) + 1), max(2, -(-w // cell) + 1)
        coarse = np.clip(base + rng.uniform(-28.0, 28.0, size=(gh, gw, 3)), 0, 255).astype(np.uint8)
        return np.asarray(Image.fromarray(coarse, "RGB").resize((w, h), Image.Resampling.BILINEAR)).copy()
    if kind == "stripes":
        tex = sample_texture(rng, "stripes", max(h, w) // 4)
        y, x = np.ogrid[0:h, 0:w]
        along = x * np.float32(np.cos(tex["angle"])) + y * np.float32(np.sin(tex["angle"]))
        wave = 20.0 * np.sin(along * np.float32(2.0 * np.pi / tex["period"]) + np.float32(tex["phase"]))
        return np.clip(base.astype(np.float32) + wave[..., None], 0, 255).astype(np.uint8)
    raise InputError(f"unknown background {kind!r}; valid backgrounds: {', '.join(BACKGROUNDS)}")
