"""examples/quickstart.ipynb: committed without outputs, and run top to bottom in a real Jupyter kernel
(nbclient, ipykernel) on small sizes (BINDING_LENS_QUICKSTART=small), offline, in a temporary folder."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def test_the_committed_notebook_has_no_outputs_and_is_valid():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert len(code) >= 5
    dirty = [i for i, cell in enumerate(code) if cell.outputs or cell.execution_count is not None]
    assert not dirty, f"code cells {dirty} of {NOTEBOOK.name} keep outputs: clear them before committing"
    assert set(notebook.metadata) <= {"kernelspec", "language_info"}, "notebook metadata beyond the kernel's"
    for cell in code:
        ast.parse(cell.source)  # every cell is plain Python (no shell escapes or magics)


def kernel_here(folder: Path) -> Path:
    """A `python3` kernelspec for this interpreter (JUPYTER_PATH comes first), whatever else is installed."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))
    return folder


def outputs(cell) -> str:
    """A cell's printed text and its result's plain text."""
    parts = [out.get("text", "") for out in cell.outputs if out.output_type == "stream"]
    parts += [out.data.get("text/plain", "") for out in cell.outputs if out.output_type == "execute_result"]
    return "\n".join(parts)


@pytest.mark.slow
def test_the_quickstart_notebook_runs_in_a_kernel_on_small_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("BINDING_LENS_QUICKSTART", "small")
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_here(tmp_path / "jupyter")))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    work = tmp_path / "work"
    work.mkdir()
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    text = [outputs(cell) for cell in code]
    assert "blocks, d_model 96 | grid (12, 12)" in text[1] and "torch.Size([2, 145, 96])" in text[1]
    assert "quadratic" in text[2] and "AUROC [95% CI]" in text[2]
    assert (work / "runs" / "quickstart" / "probes" / "L04_quadratic.safetensors").is_file()
    by_k = ast.literal_eval(text[3])
    assert list(by_k)[:4] == [1, 2, 4, 8] and all(0 <= v <= 1 for v in by_k.values())
    auroc = ast.literal_eval(text[4])
    assert set(auroc) == {"clean", "binding subspace shuffled", "random subspace shuffled"}
    assert auroc["binding subspace shuffled"] != auroc["clean"]  # the edit reached the next layer
    viewer = [out for out in code[5].outputs if out.output_type == "execute_result"]
    assert viewer and viewer[0].data["text/html"].startswith('<iframe srcdoc="')
    assert len(viewer[0].data["text/plain"]) < 100  # the page is stored once, in the iframe
