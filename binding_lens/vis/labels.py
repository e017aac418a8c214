"""Readable token labels: "CLS", "reg0".."reg3" for register tokens, "r{row}c{col}" for patches.

Every supported ViT puts CLS first, then its registers, then the patches in row-major order, so a
label list lines up with the sequence positions of a cache entry.
"""

from __future__ import annotations

from ..errors import InputError


def patch_label(row: int, col: int) -> str:
    """The label of patch (row, col), e.g. "r3c7"."""
    return f"r{row}c{col}"


def token_labels(grid: tuple[int, int], n_prefix: int = 1, n_registers: int | None = None) -> list[str]:
    """Labels of every sequence position: CLS, registers, then the rows x cols patches row-major.

    `n_prefix` counts CLS plus registers; `n_registers` defaults to `n_prefix - 1`.
    """
    rows, cols = (int(grid[0]), int(grid[1]))
    if rows < 1 or cols < 1:
        raise InputError(f"grid must be (rows, cols) of positive integers, got {grid!r}")
    registers = n_prefix - 1 if n_registers is None else n_registers
    if n_prefix < 1 or registers != n_prefix - 1:
        raise InputError(
            f"expected one CLS token followed by the registers, got n_prefix={n_prefix}, n_registers={n_registers}"
        )
    prefix = ["CLS"] + [f"reg{i}" for i in range(registers)]
    return prefix + [patch_label(r, c) for r in range(rows) for c in range(cols)]


def grid_for_length(n_tokens: int, n_prefix: int) -> tuple[int, int]:
    """The square patch grid of a sequence of `n_tokens` positions, or an error asking for `grid=`."""
    n_patches = n_tokens - n_prefix
    side = int(round(n_patches**0.5)) if n_patches > 0 else 0
    if side < 1 or side * side != n_patches:
        raise InputError(
            f"{n_tokens} tokens minus {n_prefix} prefix token(s) = {n_patches} patches is not a square grid; "
            "pass grid=(rows, cols) (model.patch_grid(pixels) gives it)"
        )
    return side, side
