"""Assemble the single-file viewer page: inline CSS, metadata JSON, base64 blobs, inline script.

The CSS and the script live as package data (`static/viewer.css`, `static/viewer.js`) and are copied
into the page when it is built, so the written file still carries everything inline. The script reads
the metadata, decodes one map per (model, image, probe, layer) on demand (base64 ->
DecompressionStream("deflate") -> undo the row filter, as `encoding.decode` does) and draws the
heatmaps on canvases; `window.bindingLensViewer` exposes the state and decoded rows for tests.

No external URL appears anywhere (no CDN, no fonts, no images from the network), so the file works
from file://, offline, and inside a notebook's iframe. `viewer_page` also keeps the file under a
size budget by lowering the bits per value, since bigger files stop opening comfortably.
"""

from __future__ import annotations

import base64
import html
import json
import re
import warnings
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Any

from ...errors import InputError
from ...io.documents import Json
from .encoding import check_bits
from .maps import ModelMaps, ViewerImage
from .payload import build_payload, estimate_map_bytes, image_entry

MB = 1_000_000
LOWEST_FALLBACK_BITS = 3
"""Fewer than 8 levels makes the heatmaps posterised; below this the budget error asks for less data."""
FIXED_BYTES = 100_000
"""Page bytes besides maps and images (script, style, metadata), generously."""
OWN_OBJECT_COLOR = "#00e5ff"
"""The dashed box around the chosen patch's own object (static/viewer.js draws it; the legend explains it)."""

_BODY = """
<header><h1>{title}</h1>
<p class="hint">Hover a patch to see its IsSameObject scores against every other patch; click locks it (click again to
unlock), <kbd>&larr;</kbd><kbd>&uarr;</kbd><kbd>&rarr;</kbd><kbd>&darr;</kbd> move it, <kbd>[</kbd> <kbd>]</kbd> or the
slider change the layer. The right panel shows what block l+1 attends to from the same patch.</p></header>
<div class="controls">
<label>model <select id="model"></select></label>
<label>image <select id="image"></select></label>
<label>probe <select id="probe"></select></label>
<label class="layer">layer <input type="range" id="layer" min="0" max="0" step="1" value="0"
  aria-label="layer"><output id="layer-label"></output></label>
<label><input type="checkbox" id="grid" checked> patch grid</label>
<label><input type="checkbox" id="truth" checked> ground truth</label>
<label>opacity <input type="range" id="opacity" min="0" max="100" value="70"></label>
</div>
<p class="legend" id="legend">
<span><svg width="24" height="14" aria-hidden="true"><rect x="2" y="2" width="20" height="10" fill="none"
  stroke="{own_object}" stroke-width="2" stroke-dasharray="5 3"/></svg> cyan dashed: the patches of the chosen
  patch's own object (ground truth, on the patch grid)</span>
<span><svg width="24" height="14" aria-hidden="true"><rect x="7" y="2" width="10" height="10" fill="none"
  stroke="#000" stroke-width="3"/><rect x="7" y="2" width="10" height="10" fill="none" stroke="#fff"
  stroke-width="1.5"/></svg> white square: the chosen patch (red once locked)</span>
<span><svg width="24" height="14" aria-hidden="true"><path d="M2 10 Q12 0 22 8" fill="none" stroke="#333"
  stroke-width="3"/><path d="M2 10 Q12 0 22 8" fill="none" stroke="#fff" stroke-width="1.2"/></svg> white
  lines: the objects' outlines (ground truth)</span>
</p>
<div id="error" hidden></div>
<main class="panels">
{panels}
</main>
<footer id="footer"></footer>
"""

_PANEL = """<section class="panel" id="panel-{kind}"><h2></h2>
<div class="stage"><canvas class="base"></canvas><canvas class="heat" id="heat-{kind}"></canvas>\
<canvas class="marks"></canvas></div>
<canvas class="colorbar"></canvas><div class="scale"><span>0</span><span class="max"></span></div>
<p class="caption"></p></section>"""


@cache
def _static(name: str) -> str:
    """A file of the package's `static/` folder (the page's CSS or script), read once."""
    return (files(__package__) / "static" / name).read_text(encoding="utf-8")


def _json_for_script(value: Any) -> str:
    """JSON that cannot end its <script> element early ("<" only occurs inside strings, as \\u003c)."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def render_html(meta: Json, blobs: dict[str, str]) -> str:
    """The page for a payload (see `payload.build_payload`)."""
    title = html.escape(str(meta.get("title", "binding_lens viewer")))
    panels = "\n".join(_PANEL.format(kind=kind) for kind in ("score", "attn"))
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title><style>{_static('viewer.css')}</style></head><body>",
        _BODY.format(title=title, panels=panels, own_object=OWN_OBJECT_COLOR),
        f'<script type="application/json" id="bl-meta">{_json_for_script(meta)}</script>\n',
    ]
    parts += [
        f'<script type="application/octet-stream" id="{blob_id}">{text}</script>\n' for blob_id, text in blobs.items()
    ]
    parts.append(f"<script>{_static('viewer.js')}</script>\n</body></html>\n")
    return "".join(parts)


def viewer_page(
    images: Sequence[ViewerImage],
    models: Sequence[ModelMaps],
    *,
    title: str = "binding_lens: IsSameObject viewer",
    bits: int = 6,
    max_mb: float | None = 30.0,
    display_px: int = 448,
) -> str:
    """The viewer HTML for these maps, at `bits` bits per value, or fewer when needed to stay under `max_mb`.

    Lowering the bits stops at 3; if the page is still too big a ValueError says what to drop.
    """
    bits = check_bits(bits)
    entries = [image_entry(image) for image in images]
    depth = bits
    if max_mb is not None:  # a first guess from a sample of maps saves encoding everything at each depth
        fixed = sum(len(e["src"]) + len(e["outline"] or "") for e in entries) + FIXED_BYTES
        while depth > LOWEST_FALLBACK_BITS and fixed + estimate_map_bytes(models, depth) > max_mb * MB:
            depth -= 1
    while True:
        meta, blobs = build_payload(images, models, depth, title, entries, display_px)
        page = render_html(meta, blobs)
        size = len(page.encode("utf-8"))
        if max_mb is None or size <= max_mb * MB:
            if depth < bits:
                warnings.warn(
                    f"viewer maps stored at {depth} bits instead of {bits} to stay under {max_mb} MB", stacklevel=2
                )
            return page
        if depth <= LOWEST_FALLBACK_BITS:
            break
        depth -= 1
    raise InputError(
        f"the viewer would take {size / MB:.1f} MB even at {depth} bits per value (limit max_mb={max_mb}): "
        "show fewer images, probes or layers, or raise max_mb (None: no limit)"
    )


_META = re.compile(r'<script type="application/json" id="bl-meta">(.*?)</script>', re.S)
_BLOB = re.compile(r'<script type="application/octet-stream" id="(b\d+)">([A-Za-z0-9+/=\s]*)</script>')


def read_page(page: str) -> tuple[Json, dict[str, bytes]]:
    """Read a viewer page back: (metadata, {blob id: zlib bytes}); decode maps with `encoding.decode`."""
    found = _META.search(page)
    if found is None:
        raise InputError("not a binding_lens viewer page (no bl-meta block)")
    meta = json.loads(found.group(1))
    blobs = {blob_id: base64.b64decode(text) for blob_id, text in _BLOB.findall(page)}
    missing = sorted(set(meta["blobs"]) - set(blobs))
    if missing:
        raise InputError(f"viewer page lacks data blocks {missing[:5]}")
    return meta, blobs
