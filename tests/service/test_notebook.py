"""examples/quickstart.ipynb, run cell by cell in a fresh Python kernel against a real service (issue 58): the
README's Python session and a photograph denoised with pictures inline, so that the notebook never goes
stale. Its committed outputs are from such a run: ``KPCA_NOTEBOOK_OUTPUTS=1`` writes them back into the file."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.ipynb"


@pytest.mark.timeout(900)
def test_the_quickstart_notebook_runs_and_shows_its_pictures(server, monkeypatch, tmp_path):
    monkeypatch.setenv("KPCA_URL", server)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parents[1])}}).execute()  # raises on a cell's error
    texts = "\n".join(out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
                      for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", []))
    assert "completed after pass" in texts and "(5, 16)" in texts, texts
    assert "denoised" in texts and "dB SNR" in texts, texts
    pictures = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
                if "image/png" in out.get("data", {})]
    assert len(pictures) == 1  # clean, noisy and denoised side by side
    if os.environ.get("KPCA_NOTEBOOK_OUTPUTS"):
        nbformat.write(notebook, NOTEBOOK)
