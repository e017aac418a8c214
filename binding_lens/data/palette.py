"""The fixed color palette of synthetic scenes (name -> RGB).

Eight well-separated hues, all distinct from the mid-dark neutral backgrounds, so that
with the eight shapes there are 64 color x shape conjunctions (K = 64 as in the ColorShape
data of the method notes section 8).
"""

from __future__ import annotations

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (215, 38, 38),
    "orange": (245, 135, 20),
    "yellow": (235, 215, 35),
    "green": (45, 165, 65),
    "cyan": (35, 200, 215),
    "blue": (45, 75, 220),
    "purple": (140, 60, 200),
    "white": (240, 240, 240),
}
