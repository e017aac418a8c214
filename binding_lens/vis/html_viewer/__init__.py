"""The interactive IsSameObject viewer: one self-contained, offline HTML page per call.

build     `viewer` / `viewer_html` (and `ModelEntry`): run the models, write or return the page
compute   a hooked ViT's cache -> quantized IsSameObject and attention maps (`ModelMaps`)
images    input images checked, resized for display, instance outlines, PNG data URLs
maps      what a page shows before encoding (`ViewerImage`, `ModelMaps`)
encoding  compact N x N maps: quantize, keep one triangle, delta-filter, deflate (`decode` inverts)
payload   the page's metadata JSON and one base64 blob per map
page      the page itself (`viewer_page`, `read_page`), with static/viewer.css and static/viewer.js inlined
notebook  the page in a notebook's iframe (`InlineViewer`, `iframe_html`, `show`)
"""
