"""Typed solver state: one dataclass per solver family, with its checkpoint encoding beside it.

A solver's state is a record of arrays and scalars (`SolverState` and its families): the KHA family's
(`KHAState`: ``kha``, ``kha-t``, ``kha-et``, ``kha-smd``, ``ritz``), autoencoder KPCA's
(`AutoencoderState`: ``akpca``, ``ds-akpca``) and the one-shot solvers' (`ComponentsState`: ``exact``,
``lanczos``, ``nystrom`` and the reduced-set solvers). Every solver declares its family
(`kpca.solvers.Solver.state_type`); modules outside a solver read a state through these fields and
methods.

The encoding (`SolverState.to_checkpoint`, `SolverState.from_checkpoint`) is the flat mapping of
str keys to numpy arrays and Python scalars that `store.CheckpointStore` writes, key for key what the
solvers kept before the state was typed (each field under its own name, ``pass_`` under ``pass``; the
centring's entries, `kpca.rows.Centering.to_state`, as they are; a one-shot fit's ``used`` values as
``used_<name>``; entries the solver does not know, such as a clustering's labels, carried as they
are in ``extras``). So a checkpoint written before the state was typed loads as it is; that is the
*migration*, and an optional field a checkpoint predates (``BK``, ``norm_limit``, ``update``) comes
back None, for the solver's ``restore`` or its defaults to fill in. A field that is None is not
written, as those keys were absent before.

*Transition.* A state also reads as a read-only mapping of its encoding (``state["A"]``, ``"B" in
state``, ``state.items()``), for callers not yet converted to its fields (the tests, bench/ and paper/
read results so); `kpca.solvers.as_state` turns such a mapping back into its family's record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

import numpy as np

__all__ = ["SolverState", "IterativeState", "KHAState", "AutoencoderState", "ComponentsState", "CENTERING_PREFIXES"]

#: Keys of the centring's entries (`kpca.rows.Centering.to_state`, `kpca.affinity.AffinityCentering.to_state`).
CENTERING_PREFIXES = ("centering_", "affinity_")
_RENAMED = {"pass_": "pass"}  # field -> checkpoint key, where they differ
_CARRIED = ("centering", "extras")  # fields written as their own entries


@dataclass(eq=False, kw_only=True)
class SolverState(Mapping):
    """What every solver's state holds.

    Attributes
    ----------
    solver : str
        The solver's name (`kpca.solvers.SOLVERS`).
    n_rows : int
        l, the training rows the state covers.
    centering : dict
        The centring of the training data as `kpca.rows.Centering.to_state` gives it (empty: none, as
        over a dense K'); `kpca.rows.KernelRows.restore_centering` takes it.
    pass_ : int or None
        Passes completed (checkpoint key ``pass``); a one-shot fit's is set by the job that saves it.
    residual : float or None
        The relative residual of the served components, where measured.
    converged : bool or None
        True once the fit met its ``tol`` (None: not judged).
    solver_note : str or None
        What the solver says of its fit (`kpca.fitting.PreparedFit.notes`).
    elapsed_s : float or None
        Seconds the fit ran up to this state (the workers' progress sets it).
    extras : dict
        Entries that are not the solver's (a clustering's labels, `kpca.clustering.Clustering.to_state`),
        or that this code does not know, carried and saved as they are.
    """

    solver: str
    n_rows: int
    centering: dict = field(default_factory=dict)
    pass_: int | None = None
    residual: float | None = None
    converged: bool | None = None
    solver_note: str | None = None
    elapsed_s: float | None = None
    extras: dict = field(default_factory=dict)

    # -- the record's interface ------------------------------------------------------------------------

    def replace(self, **changes) -> Self:
        """A new state with ``changes`` (field names) applied; arrays are shared, not copied. O(fields)."""
        return dataclasses.replace(self, **changes)

    def copied(self, skip: tuple[str, ...] = ()) -> Self:
        """A new state whose array fields are copies (those named in ``skip`` left out: None), for a step
        that stays pure. O(bytes of the arrays)."""
        changes: dict[str, np.ndarray | None] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in skip:
                changes[f.name] = None
            elif isinstance(value, np.ndarray):
                changes[f.name] = value.copy()
        return self.replace(**changes)

    @property
    def refines(self) -> bool:
        """Whether its passes are deterministic Rayleigh-Ritz passes (`kpca.solvers.Solver.refine`) rather
        than steps; False but for a KHA-family state with ``update`` ``"rayleigh-ritz"``."""
        return False

    @property
    def images(self) -> np.ndarray | None:
        """``A K'`` (r, l) of the coefficients it keeps, where it keeps them; None otherwise."""
        return None

    def resumed_params(self) -> dict:
        """Parameters a fit resumed from this state goes on with as it went (`kpca.fitting.prepare_fit`)."""
        return {}

    def with_extras(self, **entries) -> Self:
        """A new state that also carries ``entries`` (not the solver's: `extras`)."""
        return self.replace(extras={**self.extras, **entries})

    def without_extras(self, *keys: str) -> Self:
        """A new state without the carried entries ``keys``."""
        return self.replace(extras={k: v for k, v in self.extras.items() if k not in keys})

    # -- the encoding ----------------------------------------------------------------------------------

    def to_checkpoint(self) -> dict:
        """The flat encoding `store.CheckpointStore.save` writes (module docstring): numpy arrays and Python
        scalars by key, None fields left out. No array is copied. O(fields)."""
        out = {}
        for f in fields(self):
            if f.name in _CARRIED:
                continue
            value = getattr(self, f.name)
            if value is not None:
                out[_RENAMED.get(f.name, f.name)] = value
        out.update(self._own_entries())
        out.update(self.centering)
        out.update(self.extras)
        return out

    def _own_entries(self) -> dict:
        """Entries a family encodes itself besides its fields (`ComponentsState.used`)."""
        return {}

    @classmethod
    def from_checkpoint(cls, entries: Mapping[str, Any]) -> Self:
        """The state a checkpoint's entries (`to_checkpoint`, or a state saved before the state was typed,
        the same keys) encode; a field the entries lack takes its default (None: the solver fills it in,
        or reads it as absent). ValueError naming the keys a required field misses. O(entries)."""
        rest = dict(entries)
        values = {}
        for f in fields(cls):
            key = _RENAMED.get(f.name, f.name)
            if f.name not in _CARRIED and key in rest:
                values[f.name] = rest.pop(key)
        values.update(cls._take_own(rest))
        values["centering"] = {key: rest.pop(key) for key in list(rest) if key.startswith(CENTERING_PREFIXES)}
        values["extras"] = rest
        missing = [_RENAMED.get(f.name, f.name) for f in fields(cls) if f.name not in values
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ValueError(f"state: a {entries.get('solver')!r} state needs {missing}; the checkpoint has "
                             f"{sorted(entries)}")
        return cls(**values)

    @classmethod
    def _take_own(cls, rest: dict) -> dict:
        """Fields a family decodes itself from the entries ``rest`` (removing them)."""
        return {}

    # -- transition: a read-only view of the encoding (module docstring) --------------------------------

    def __getitem__(self, key: str):
        return self.to_checkpoint()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_checkpoint())

    def __len__(self) -> int:
        return len(self.to_checkpoint())


@dataclass(eq=False, kw_only=True)
class IterativeState(SolverState):
    """What an iterative solver's state holds besides `SolverState`'s: the driver's counters
    (`kpca.driver.run_passes`) and the gains with their divergence guard.

    Attributes
    ----------
    t, pass_, position : int
        Steps taken, passes completed, rows of the current pass done.
    seed : int
        The permutation of pass p is ``default_rng([seed, p]).permutation(l)``.
    eta0 : float
        The resolved base gain.
    gain : ndarray
        This pass's gains ((r,) for the KHA family, (1,) for autoencoder KPCA).
    norm_limit : float or None
        The divergence guard's bound (None for a state saved before it was kept: the solver's default).
    gain_reductions : int or None
        How often the divergence guard reduced the gains (None: never).
    """

    t: int
    pass_: int
    position: int
    seed: int
    eta0: float
    gain: np.ndarray
    norm_limit: float | None = None
    gain_reductions: int | None = None


@dataclass(eq=False, kw_only=True)
class KHAState(IterativeState):
    """The KHA family's state (`kpca.solvers._kha`; the table there says what each entry is).

    ``A`` and ``AK`` are None only in a sharded fit's coordinator state, whose shards hold the columns
    (`kpca.sharded.passes.coordinator_state`), and which counts the rows of the guard vectors and of
    LOBPCG's previous step the shards hold (``guard_rows``, ``previous_rows``; None: none); ``B``,
    ``BK``, ``rho`` are KHA-SMD's; ``guard_A``, ``guard_AK``, ``previous_A``, ``previous_AK`` the
    Rayleigh-Ritz passes' (`kpca.solvers._rayleigh_ritz`).
    """

    A: np.ndarray | None = None
    AK: np.ndarray | None = None
    eigenvalues: np.ndarray | None = None
    update: str | None = None
    mu: float | None = None
    xi: float | None = None
    init: str | None = None
    init_size: int | None = None
    B: np.ndarray | None = None
    BK: np.ndarray | None = None
    rho: np.ndarray | None = None
    guard_A: np.ndarray | None = None
    guard_AK: np.ndarray | None = None
    previous_A: np.ndarray | None = None
    previous_AK: np.ndarray | None = None
    kernel_precision: str | None = None
    kernel_precision_reason: str | None = None
    float32_images: bool | None = None
    guard_rows: int | None = None
    previous_rows: int | None = None

    @property
    def refines(self) -> bool:
        """Whether ``update`` is ``"rayleigh-ritz"`` (the passes are `kpca.solvers._rayleigh_ritz`'s)."""
        return self.update == "rayleigh-ritz"

    @property
    def images(self) -> np.ndarray | None:
        """``AK``, ``A K'`` of the iterate (None in a sharded coordinator's state)."""
        return self.AK

    @property
    def smd(self) -> bool:
        """Whether it is KHA-SMD's (it keeps B, BK and rho)."""
        return self.solver == "kha-smd"

    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A, AK)`` of the iterate; ValueError for a sharded coordinator's state, whose shards hold them."""
        if self.A is None or self.AK is None:
            raise ValueError(f"state: this {self.solver} state holds no coefficients (a sharded fit's coordinator "
                             "state: its shards hold the columns)")
        return self.A, self.AK

    def differentials(self) -> tuple[np.ndarray, np.ndarray]:
        """KHA-SMD's ``(B, BK)``; ValueError naming the one missing (the solver's restore adds ``BK``)."""
        if self.B is None:
            raise ValueError(f"state: this {self.solver} state keeps no 'B' (KHA-SMD's differential parameters)")
        if self.BK is None:
            raise ValueError("state: a kha-smd state needs 'BK' (B K'); the solver's restore adds it")
        return self.B, self.BK

    def gain_terms(self) -> tuple[np.ndarray, float, float]:
        """KHA-SMD's log-gains and meta-parameters ``(rho, mu, xi)``; ValueError if the state lacks them."""
        if self.rho is None or self.mu is None or self.xi is None:
            raise ValueError(f"state: this {self.solver} state keeps no 'rho', 'mu' and 'xi' (KHA-SMD's gains)")
        return self.rho, float(self.mu), float(self.xi)

    def resumed_params(self) -> dict:
        """``update`` as it ran, and ``kernel_precision`` float64 for a fit that float32 could not resolve."""
        kept = {} if self.update is None else {"update": self.update}
        if self.kernel_precision == "float64":
            kept["kernel_precision"] = "float64"
        return kept


@dataclass(eq=False, kw_only=True)
class AutoencoderState(IterativeState):
    """Autoencoder KPCA's state (`kpca.solvers._akpca`, whose table says what each entry is;
    ``points`` (l, d) only for ``ds-akpca``, `kpca.solvers._ds_akpca`)."""

    encoder: np.ndarray
    decoder: np.ndarray
    scale: float
    mean: np.ndarray
    start_vector: np.ndarray
    lanczos_tol: float
    lanczos_max_iter: int
    surrogate_sum: float
    points: np.ndarray | None = None


USED_PREFIX = "used_"


@dataclass(eq=False, kw_only=True)
class ComponentsState(SolverState):
    """A one-shot solver's state: the components as served.

    Attributes
    ----------
    A : ndarray (r, l or m)
        Coefficients over the training rows (``serves`` ``"expansion"``) or over ``centres``.
    eigenvalues : ndarray (r,)
    AK : ndarray or None
        ``A K'``; None: ``diag(eigenvalues) A`` (`kpca.solvers.stored_components`).
    centres : ndarray (m, n) or None
        The centres a ``"centres"`` model serves.
    iterations : int or None
        Iterations an eigensolver took (``lanczos``).
    used : dict
        Values the fit settled on from the data, by parameter name (checkpoint keys ``used_<name>``),
        reported in ``params_used``.
    """

    A: np.ndarray
    eigenvalues: np.ndarray
    AK: np.ndarray | None = None
    centres: np.ndarray | None = None
    iterations: int | None = None
    used: dict = field(default_factory=dict)

    @property
    def images(self) -> np.ndarray | None:
        """``AK`` where the solver kept it (None: ``diag(eigenvalues) A``, not kept)."""
        return self.AK

    def to_checkpoint(self) -> dict:
        """`SolverState.to_checkpoint`, with ``used`` as its ``used_<name>`` entries."""
        out = super().to_checkpoint()
        del out["used"]
        return out

    def _own_entries(self) -> dict:
        return {USED_PREFIX + name: value for name, value in self.used.items()}

    @classmethod
    def _take_own(cls, rest: dict) -> dict:
        return {"used": {key[len(USED_PREFIX):]: rest.pop(key) for key in list(rest) if key.startswith(USED_PREFIX)}}
