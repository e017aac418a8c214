"""The two kinds of plain dict the package keeps on purpose, each named for what it is.

`Json` is a JSON object as the package writes it to disk or reads it back: a store's manifest, a model card,
a run's summary, a checkpoint's header, a probe's, a dataset's or a recipe's config. Its fields are its
writer's, which documents them; the file is the contract, so the dict stays a dict. `Options` are keyword
arguments passed on to a callee that defines them (a Hugging Face config or `from_pretrained`, a torch
optimizer's parameter groups, a constructor's settings). A result is neither: results are typed records
(`stats.record.Record`), and the `dict[str, Any]` left in the package are the results not typed yet and
data from elsewhere (a Hugging Face dataset's row, a torch checkpoint).
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
"""A JSON object as written to or read from disk (its writer documents its fields)."""

Options = dict[str, Any]
"""Keyword arguments passed on to a callee that defines them."""
