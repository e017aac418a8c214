"""mkdocs hooks (mkdocs.yml `hooks:`): examples/quickstart.ipynb rendered as the page `quickstart.md`.

The notebook is committed without outputs (tests/integration/test_quickstart_notebook.py runs it in a
kernel), so the page is its Markdown cells as written and its code cells as Python blocks, generated at
build time: the notebook stays the one source.
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.structure.files import File, Files

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"
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


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, content=notebook_markdown(NOTEBOOK)))
    return files
