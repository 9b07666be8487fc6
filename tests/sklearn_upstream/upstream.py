"""scikit-learn's own tests of its ``KernelPCA``, run against ``kpca.KernelPCA``.

`write_upstream_tests` copies ``sklearn/decomposition/tests/test_kernel_pca.py`` of the installed
scikit-learn (its wheel, installed from the package index with the test dependencies; never kept in this
repository) next to this module, with one line changed: its import of ``KernelPCA`` takes ours. The test
set-up (tests/conftest.py) writes it before collection; the copy is git-ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

import sklearn

SOURCE = Path(sklearn.__file__).parent / "decomposition" / "tests" / "test_kernel_pca.py"
TARGET = Path(__file__).parent / "test_kernel_pca.py"
IMPORT = "from sklearn.decomposition import PCA, KernelPCA\n"
OURS = "from sklearn.decomposition import PCA\nfrom kpca import KernelPCA  # the one line changed\n"
#: scikit-learn's tests that check a behaviour kpca.KernelPCA changes on purpose (kpca/kernel_pca.py's
#: module docstring says why): test id -> reason
DIFFERENCES = {
    "test_precomputed_kernel_not_psd[randomized]":
        "eigen_solver='randomized' returns the leading eigenpairs of a kernel with negative eigenvalues, as 'dense' "
        "does, instead of raising because a power iteration ranked them by magnitude (kpca/kernel_pca.py)",
}


def upstream_text() -> str:
    """The installed scikit-learn's test file with its KernelPCA import replaced; ValueError if that import
    line is not there exactly once (a scikit-learn whose file changed: read it and adapt `IMPORT`)."""
    text = SOURCE.read_text()
    if text.count(IMPORT) != 1:
        raise ValueError(f"{SOURCE}: expected the line {IMPORT!r} once, found it {text.count(IMPORT)} times")
    return text.replace(IMPORT, OURS)


def write_upstream_tests() -> Path:
    """Write `TARGET` from `upstream_text` (temporary name, then rename; test processes may race). Returns it."""
    text = upstream_text()
    if not TARGET.exists() or TARGET.read_text() != text:
        temporary = TARGET.with_name(f".{TARGET.name}.{os.getpid()}.tmp")
        temporary.write_text(text)
        os.replace(temporary, TARGET)
    return TARGET
