"""mkdocs hooks (mkdocs.yml `hooks:`): examples/quickstart.ipynb rendered as the page `quickstart.md`, and a
search that works when the site is opened from disk.

The notebook is committed without outputs (tests/integration/test_quickstart_notebook.py runs it in a
kernel), so the page is its Markdown cells as written and its code cells as Python blocks, generated at
build time: the notebook stays the one source.

From disk (`site/index.html` through file://) Material's offline plugin makes links point at files and
inlines the search index, but a browser starts no web worker from a file:// page, and the search runs in
one: iframe-worker's shim (an npm package, installed with the browser tests' `npm ci`) runs it in an iframe
instead. The plugin would load that shim from unpkg.com; the site serves its own copy, so it needs no
network. Without the package (mkdocs run alone) the site still opens from disk, its search only over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
WORKER_SHIM = ROOT / "tests" / "browser" / "node_modules" / "iframe-worker" / "shim" / "index.js"
SHIM_PAGE = "assets/javascripts/iframe-worker-shim.js"
PAGE = "quickstart.md"
SOURCE_NOTE = (
    "!!! note\n    This page is `examples/quickstart.ipynb`, rendered without its outputs. Open the notebook in "
    "Jupyter (`pip install jupyterlab`) to run it; it runs offline, on a CPU.\n"
)


def notebook_markdown(path: Path) -> str:
    """The notebook's cells in order: Markdown as written, code as fenced Python blocks."""
    cells = json.loads(path.read_text())["cells"]
    parts = []
    for number, cell in enumerate(cells):
        source = "".join(cell["source"]).rstrip()
        if cell["cell_type"] == "code":
            parts.append(f"```python\n{source}\n```")
        else:
            parts.append(source)
        if number == 0:  # after the title and the introduction
            parts.append(SOURCE_NOTE)
    return "\n\n".join(parts) + "\n"


@event_priority(-50)  # after the offline plugin's own on_config (priority 0), which adds the unpkg.com shim
def on_config(config):
    polyfills = [script for script in config.extra.get("polyfills", []) if "iframe-worker" not in str(script)]
    config.extra["polyfills"] = polyfills + ([SHIM_PAGE] if WORKER_SHIM.is_file() else [])
    return config


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, content=notebook_markdown(NOTEBOOK)))
    if WORKER_SHIM.is_file():
        files.append(File.generated(config, SHIM_PAGE, abs_src_path=str(WORKER_SHIM)))
    return files
