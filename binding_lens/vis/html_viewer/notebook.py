"""Show the viewer inside a notebook: an iframe whose `srcdoc` is the whole page.

An iframe keeps the viewer's script and element ids apart from the notebook's own page, and
`srcdoc` needs no file or server. IPython is imported only when `show` is called.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from ...errors import InputError


def iframe_html(page: str, height: int = 820) -> str:
    """An <iframe> element holding `page` (a full HTML document) in its srcdoc attribute."""
    if not isinstance(page, str) or "<html" not in page[:500].lower():
        raise InputError("iframe_html takes the viewer page as an HTML string (viewer_html(...) returns one)")
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:{int(height)}px;border:0" '
        'title="binding_lens viewer"></iframe>'
    )


@dataclass(frozen=True)
class InlineViewer:
    """Wraps a viewer page; notebooks render it through `_repr_html_` (no IPython import needed). The page
    stays out of the repr, so a notebook's plain-text output does not store it a second time."""

    page: str = field(repr=False)
    height: int = 820

    def _repr_html_(self) -> str:
        return iframe_html(self.page, self.height)


def show(page: str, height: int = 820) -> Any:
    """Display the viewer page in the running notebook (needs IPython); returns the displayed object."""
    try:
        from IPython.display import HTML, display
    except ImportError as error:
        raise ImportError(
            "show() needs IPython (a Jupyter notebook); otherwise write the page with viewer()"
        ) from error
    shown = HTML(iframe_html(page, height))
    display(shown)
    return shown
