"""The official ADE20K 2021_17_01 encoding, for release trees crafted in that format."""

from __future__ import annotations

import numpy as np

OBJECTNAMES = ["wall", "building, edifice", "sky", "person, individual, someone, somebody, mortal, soul"]
OBJECTNAMES += [f"thing{k}" for k in range(len(OBJECTNAMES), 299)] + ["lamp post"]  # 'lamp post' is class 300


def encode_ade_seg(classes, b):
    """Encode like the release: R = class // 256 * 10 (+ a digit the decoder must ignore), G = class % 256."""
    r = (classes // 256) * 10 + 3 * (classes // 256 > 0)
    return np.stack([r, classes % 256, b], axis=-1).astype(np.uint8)
