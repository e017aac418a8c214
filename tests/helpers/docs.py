"""The README and the documentation pages as the tests read them: their code blocks, inline commands and
`<!-- readme-test: ... -->` markers (tests/integration/test_readme.py runs them; the release test runs the
getting-started page's blocks in a fresh environment).

DOCUMENTS is README.md, then every page of mkdocs.yml's `nav` under docs/, in nav order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

HUB = {"facebook/dinov2-small": "random:dinov2-small"}  # the same architecture with seeded random weights
DATA = {
    "/data/ADE20K_2021_17_01": "data/ADE20K_2021_17_01",  # paths relative to the temporary cwd
    "/data/my_scenes": "data/my_scenes",
    "/data/coco": "data/coco",  # tests/helpers/coco.py writes it (annotations/instances.json, images/)
    "/data/hf": "data/hf",  # tests/helpers/hf.py writes it (arrow/, a save_to_disk folder; parquet/)
    "/data/saes": "data/saes",  # tests/helpers/saes.py writes it (saelens/, prisma/, saev.pt: zoo:mae layer 3)
}
MARKER = re.compile(r"^<!--\s*readme-test:(.*?)-->\s*$")
FENCE = re.compile(r"^```(\S*)\s*$")
INLINE = re.compile(r"`((?:\.venv/bin/)?binding-lens\s[^`]+)`")


def nav_pages(nav: list) -> list[str]:
    """The Markdown files of mkdocs.yml's `nav`, in order (nested sections flattened)."""
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def documents() -> list[Path]:
    """README.md, then the site's pages in nav order (a generated page, such as the notebook's, has no file)."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = [ROOT / "docs" / page for page in nav_pages(nav)]
    return [README, *(page for page in pages if page.exists())]


DOCUMENTS = documents()


@dataclass(frozen=True)
class Item:
    line: int  # the document's line of the block's first code line, or of the inline command
    kind: str  # bash | python | inline
    text: str
    marker: str | None
    doc: str = "README.md"  # the document, relative to the repository root

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line} {self.kind}"


def readme_items(text: str) -> tuple[list[Item], list[int]]:
    """A document's bash/python blocks and inline commands in order, and the lines of markers that precede
    nothing they could apply to."""
    lines, items, dangling, i = text.splitlines(), [], [], 0
    while i < len(lines):
        marker, marker_line = None, None
        found = MARKER.match(lines[i])
        if found:
            marker, marker_line = found.group(1).strip(), i + 1
            i += 1
        if i >= len(lines) or not lines[i].strip():
            dangling += [marker_line] if marker is not None else []
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if fence.group(1) in ("bash", "python"):
                items.append(Item(i + 2, fence.group(1), "\n".join(lines[i + 1 : end]), marker))
            elif marker is not None:
                dangling.append(marker_line)  # the layout diagram and other blocks are not run
            i = end + 1
            continue
        end = i
        while end < len(lines) and lines[end].strip() and not FENCE.match(lines[end]) and not MARKER.match(lines[end]):
            end += 1
        paragraph = "\n".join(lines[i:end])
        commands = [
            (i + 1 + paragraph[: m.start()].count("\n"), " ".join(m.group(1).split()))
            for m in INLINE.finditer(paragraph)
        ]
        items += [Item(line, "inline", command, marker) for line, command in commands]
        if marker is not None and not commands:
            dangling.append(marker_line)
        i = end
    return items, dangling


def document_items() -> tuple[list[Item], list[str]]:
    """Every document's items, in DOCUMENTS order, and its dangling markers as `doc:line`."""
    items: list[Item] = []
    dangling: list[str] = []
    for path in DOCUMENTS:
        doc = path.relative_to(ROOT).as_posix()
        found, lines = readme_items(path.read_text())
        items += [replace(item, doc=doc) for item in found]
        dangling += [f"{doc}:{line}" for line in lines]
    return items, dangling


def offline(text: str) -> str:
    for old, new in {**HUB, **DATA}.items():
        text = text.replace(old, new)
    return text


def python_code(item: Item) -> str:
    """A Python block's code with its marker's `old -> new` replacements made and the offline substitutions
    (HUB, DATA) applied; a `needs MODULE` marker makes no replacement."""
    code, marker = item.text, item.marker or ""
    if marker.startswith("needs "):
        marker = ""
    for replacement in filter(None, (part.strip() for part in marker.split(";"))):
        old, new = (side.strip() for side in replacement.split("->"))
        assert old in code, f"{item.id}: the readme-test marker replaces {old!r}, which the block lacks"
        code = code.replace(old, new)
    return offline(code)
