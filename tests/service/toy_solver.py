"""A toy solver, declared and registered in a few lines: exact kernel PCA on a random subset of the rows,
served over that subset alone (the ``centres`` kind). Loaded by the service as a plugin
(``solver_plugins``; see tests/service/test_plugin_solver.py)."""

import numpy as np

from kpca.params import Param
from kpca.rows import KernelRows
from kpca.solvers import Solver, exact_components, register


def fit(rows, n_components, params, context, report=None):
    subset = np.sort(np.random.default_rng(params["seed"]).choice(rows.n_rows, params["size"], replace=False))
    centres = KernelRows(rows.take(subset), rows.kernel)
    eigenvalues, A = exact_components(centres.fit_centering() and centres.dense(), n_components)
    return {"solver": "toy-subset", "centres": centres.source, "A": A, "eigenvalues": eigenvalues,
            "n_rows": rows.n_rows, **centres.centering.to_state()}


register(Solver("toy-subset", "exact kernel PCA on a random subset of the rows (a toy)", fit=fit, serves="centres",
                params=(Param("size", int, 50, low=2, description="rows in the subset"),
                        Param("seed", int, 0, low=0, description="chooses the subset"))), replace=True)
