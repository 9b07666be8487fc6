"""Image requests that tune, fit or hyperresolve on a worker, with progress and cancel.

* `denoise_with_model`: an image through a stored patch model (``/v1/models/{name}/denoise-image``):
  with ``tune="auto"`` the noise is estimated from the image, the rank and pre-image chosen by the
  recorrupted risk estimate (`kpca.images.model_tuning.tune_model`), then the image denoised; with ``upscale`` > 1
  hyperresolution, constrained to reproduce the input by default (`kpca.images.hyperresolution`).
* `denoise_with_own_models`: the one-call path (``POST /v1/denoise-image``): the image's own tiles
  fitted, kernel width, rank and pre-image tuned (`kpca.images.tuning.tune_patches`), the image denoised.
* `denoise_rows_tuned`: rows through a stored model with the rank and pre-image tuned (``/denoise``).

Each returns its answer and an ``info`` dict: what was chosen (``chosen``), the noise level and
whether it was estimated, and ``steps``, the seconds each step took. A request that names a job
(``job``) writes its progress to `store.image_jobs.ImageJobStore` and stops at the next tile when a
cancel is asked for there (`store.errors.Conflict` naming ``job``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace

import numpy as np

from kpca._threads import tile_threads
from kpca.errors import Stopped
from kpca.images.denoising import LINEAR, PatchSettings, denoise_image, leading, preimages
from kpca.images.hyperresolution import hyperresolve, patch_reconstruction
from kpca.images.model_tuning import MODEL_TUNING_TILE, tune_model
from kpca.images.noise_level import noise_level, noise_level_rows
from kpca.images.patch_bands import replaced_in_bands
from kpca.images.patches import assemble_patches, extract_patches, from_unit, patch_grid, to_unit
from kpca.images.second_stage import (
    WIENER,
    apply_second_stage,
    choose_second_stage,
    lower_stage,
    stage_choice,
    stage_risks,
)
from kpca.images.tile_preimages import TilePreimages
from kpca.images.tuning import tune_patches, tuning_windows
from kpca.model import KernelModel
from kpca.preimage import reconstruct
from store.errors import Conflict
from store.image_jobs import HEARTBEAT_S
from store.places import image_jobs_at
from store.stop_flags import StopFlags
from workers.placement import fit_threads, machine_cores, running_fits
from workers.serve import load_model, reconstruct_rows

REPORT_EVERY_S = 0.5


class JobProgress:
    """Times the steps of one image request and, if it names a job, writes them to its record.

    ``step(name)`` is a context manager around one step; ``report(done, total)`` is the callback the
    numerics call (written at most every `REPORT_EVERY_S`, and raising `Stopped` once a cancel was
    asked for, or the request's stop flag ``stop`` raised: `store.stop_flags`); ``asked_to_stop`` (None
    without a flag) the ``stop`` callable of a long pre-image (`kpca.preimage.reconstruct`), which looks at
    the flag between its steps. ``finish(status, chosen, error)`` writes the end.
    """

    def __init__(self, data_dir: str, job: str | None, kind: str, stop: str | None = None, started: bool = False):
        self.data_dir = data_dir
        self.store = image_jobs_at(data_dir) if job else None
        self.stops, self.stop = StopFlags(data_dir), stop
        self.asked_to_stop = self.stops.checker(stop)
        self.job = job
        self._key = job or ""  # the job's name in the store (which is None where ``job`` is)
        self.started = self.phase_started = time.perf_counter()
        self.steps: list[dict] = []
        self.phase = "starting"
        self._written = 0.0
        if self.store is not None and not started:  # a background job's record is started by its request
            self.store.start(self._key, kind)

    @contextlib.contextmanager
    def heartbeat(self):
        """Within the block, the job's record is written at least every `store.image_jobs.HEARTBEAT_S`
        seconds (a thread of this process: it ends with the process, so a record no longer written says its
        worker stopped, `store.image_jobs.STALE_S`). Nothing without a job."""
        if self.store is None:
            yield
            return
        done, store, key, period = threading.Event(), self.store, self._key, HEARTBEAT_S

        def beat() -> None:
            while not done.wait(period):
                with contextlib.suppress(Exception):  # a record deleted or damaged meanwhile: the job says so
                    store.update(key)

        thread = threading.Thread(target=beat, name=f"kpca-image-job-{self._key}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def _write(self, **fields) -> None:
        if self.store is not None:
            now = time.perf_counter()
            self.store.update(self._key, elapsed_s=now - self.started, phase_elapsed_s=now - self.phase_started,
                              **fields)

    def report(self, done: int, total: int) -> None:
        if self.stops.raised(self.stop):
            raise Stopped("the request ended (its deadline passed or its client went away)")
        if self.store is None:
            return
        if self.store.cancel_requested(self._key):
            raise Stopped(f"image job {self.job!r} was cancelled")
        now = time.perf_counter()
        if now - self._written >= REPORT_EVERY_S or done == total:
            self._written = now
            self._write(phase=self.phase, done=done, total=total)

    @contextlib.contextmanager
    def step(self, name: str):
        self.phase, self.phase_started = name, time.perf_counter()
        self.report(0, 0)
        start = time.perf_counter()
        yield
        self.steps.append({"step": name, "seconds": time.perf_counter() - start})
        self._write(steps=self.steps)

    def finish(self, status: str, chosen: dict | None = None, error: str | None = None) -> None:
        if self.store is not None:
            with contextlib.suppress(Exception):
                self._write(status=status, phase="done", chosen=chosen, error=error, steps=self.steps)


def _run(progress: JobProgress, work, keep: bool = False):
    """``work()`` with the job's end written: completed, cancelled (`Stopped`: a `Conflict` on ``job``
    for a named job) or failed; the request's stop flag cleared. ``keep`` (a background job): its answer
    and what its headers say are kept in the image job store before the record says completed. Its tiles
    and bands run on every core of the machine when no fit runs, else on their share, as a fit's do
    (`workers.placement.fit_threads`: the request counted as one more fit)."""
    threads = fit_threads(machine_cores(), running_fits(progress.data_dir) + 1)
    try:
        with progress.heartbeat(), tile_threads(threads):
            image, info = work()
            if keep and progress.store is not None:
                shown = {key: info[key] for key in ("tune", "chosen", "noise", "noise_estimated", "candidates")
                         if key in info}  # what its answer's headers say (service.images.chosen_headers)
                progress.store.save_result(progress._key, image, {**shown, "steps": progress.steps})
    except Stopped:
        progress.finish("cancelled")
        if progress.job is None:  # stopped by its request's stop flag: the request has ended
            raise
        raise Conflict(f"image job {progress.job!r} was cancelled", "job") from None
    except Exception as exc:
        progress.finish("failed", error=str(exc))
        raise
    finally:
        progress.stops.clear(progress.stop)
    info["steps"] = progress.steps
    progress.finish("completed", info.get("chosen"))
    return image, info


def _second_stage(progress: JobProgress, choice: str, unit: np.ndarray, out: np.ndarray, patch: int, stride: int,
                  noise: float, first=None, windows=None, first_outputs=None) -> tuple[np.ndarray, dict]:
    """``out`` (the first stage's output for ``unit``) followed by the Wiener stage as ``choice`` says
    (`kpca.images.second_stage.STAGE_CHOICES`): ``auto`` the stage or variant (or none) that (T1) of
    ``first(y1, s1)`` alone and followed by each on ``windows`` picks (`kpca.images.second_stage.stage_risks`,
    `kpca.images.second_stage.lower_stage`; no ``first``: not applied), ``wiener`` the single stage always,
    ``off`` never; timed as the step "second stage"; ``first_outputs``: ``first``'s outputs the tuning kept
    (`kpca.images.second_stage.stage_risks`). Returns the image and ``{"stage", "risks"}``
    (risks None where not estimated)."""
    if choice == "off" or (choice == "auto" and first is None):
        return out, {"stage": None, "risks": None}
    with progress.step("second stage"):
        risks = stage_risks(first, windows, noise, patch, stride, first_outputs=first_outputs) \
            if choice == "auto" else None
        stage = WIENER if risks is None else lower_stage(risks)  # risks: estimated for "auto" only
        out = apply_second_stage(unit, out, (patch, stride), noise, stage)
    return out, {"stage": stage, "risks": risks}


def denoise_with_model(data_dir: str, model_name: str, image: np.ndarray, patch: int, stride: int,
                       method: str = "auto", options: dict | None = None, upscale: int = 1, tune: str = "auto",
                       n_components: int | None = None, constrained: bool = True,
                       job: str | None = None, second_stage: bool | str = "auto",
                       stop: str | None = None, background: bool = False) -> tuple[np.ndarray, dict]:
    """Denoise (or hyperresolve, ``upscale`` > 1) a decoded PNG's pixels through a stored patch model.

    ``tune="auto"`` (denoising only): the rank (at most the model's) and pre-image method are chosen by
    `kpca.images.model_tuning.tune_model` on the image itself; ``method`` other than "auto" and ``n_components``
    are kept as given; then the Wiener second stage (or a variant) where its estimated risk on the tuning
    windows is lower than the first stage's alone (``second_stage="auto"``; ``"wiener"``: always; ``"off"``: never;
    with ``tune="off"``, ``"auto"`` is off; `kpca.images.second_stage`). ``tune="off"``: ``method`` and
    ``options`` as given, all the model's components (or ``n_components``). Hyperresolution reconstructs
    with ``method`` and, when ``constrained``, back-projects onto the input
    (`kpca.images.hyperresolution.hyperresolve`); it has no second stage. Returns the image (input's dtype,
    upscaled shape) and ``info`` (module docstring), whose ``chosen`` says ``second_stage`` (``"wiener"``,
    a variant's name, `kpca.images.second_stage.variant_name`, or None) and ``second_stage_risks`` (None where
    not estimated). ``background``: the job ``job``, whose record its request started, keeps its answer in
    the image job store (`store.image_jobs`).
    """
    choice = stage_choice(second_stage)
    if upscale > 1 and choice == WIENER:
        raise ValueError("second_stage: hyperresolution (upscale > 1) has no second stage; use auto or off")
    progress = JobProgress(data_dir, job, "hyperresolution" if upscale > 1 else "denoise-image", stop,
                           started=background)

    def work() -> tuple[np.ndarray, dict]:
        unit, unit_info = to_unit(image)
        with progress.step("loading"):
            model = load_model(data_dir, model_name).model
        if n_components is not None and n_components > model.n_components:
            raise ValueError(f"n_components: the model has {model.n_components} components; ask for at most "
                             f"{model.n_components}")
        own_decoder = not isinstance(model, KernelModel)  # autoencoder KPCA: nothing to tune
        if own_decoder and n_components is not None:
            raise ValueError("n_components: this model has its own decoder; it uses all its components")
        served = model if n_components is None else leading(model, n_components)
        info: dict = {"tune": "off" if own_decoder else tune}

        def rows(patches):  # their pre-images through the served model, stopped with the request
            if n_components is None:
                return reconstruct_rows(data_dir, model_name, patches, method, options, progress.stop)
            return reconstruct(served, patches, method, stop=progress.asked_to_stop, **(options or {}))

        if upscale > 1:
            with progress.step("hyperresolution"):
                start = "spline" if constrained else "replicate"
                out = hyperresolve(unit, upscale, patch_reconstruction(rows, patch, stride), constrained,
                                   start=start, report=progress.report)
            info["chosen"] = {"method": method, "constrained": constrained, "downsampling": "block-mean",
                              "start": start}
            return from_unit(out, unit_info), info
        if tune != "auto" or own_decoder:
            with progress.step("denoising"):
                patches, grid = extract_patches(unit, patch, stride)
                out = assemble_patches(rows(patches), grid)
            if choice == WIENER:  # explicit: it needs the noise level, which nothing tuned estimated
                with progress.step("noise"):
                    info.update(noise=noise_level(unit), noise_estimated=True)
                out, _ = _second_stage(progress, choice, unit, out, patch, stride, info["noise"])
            info["chosen"] = {"method": method, "n_components": served.n_components, "options": options or {},
                              "second_stage": WIENER if choice == WIENER else None, "second_stage_risks": None}
            return from_unit(out, unit_info), info
        fixed = {"n_components": n_components, "method": None if method == "auto" else method,
                 "options": options or {}}

        learned: dict = {}  # the learned maps by rank, fitted once for every window and draw

        def prepare(y):  # what every candidate shares for one input: its patches' projections
            patches, grid = extract_patches(y, patch, stride)
            shared = TilePreimages(model, patches, learned=learned)
            return lambda c: assemble_patches(shared.preimages(c.n_components, c.method, c.options,
                                                               stop=progress.asked_to_stop), grid)

        def banded(y, c):  # the chosen candidate on the whole image, a band of patches at a time
            return replaced_in_bands(y, patch_grid(y.shape, patch, stride), lambda P: TilePreimages(
                model, P, learned=learned).preimages(c.n_components, c.method, c.options, stop=progress.asked_to_stop),
                progress.report)

        with progress.step("noise"):
            noise = noise_level(unit)
        windows = [unit[rows, cols] for rows, cols in tuning_windows(unit.shape, MODEL_TUNING_TILE)
                   if min(rows.stop - rows.start, cols.stop - cols.start) >= patch]
        with progress.step("tuning"):
            tuned = tune_model(model, windows, None, fixed, noise, report=progress.report, prepare=prepare,
                               keep_outputs=choice == "auto")
        chosen = tuned.settings
        with progress.step("denoising"):
            out = banded(unit, chosen)
        out, stage = _second_stage(progress, choice, unit, out, patch, stride, tuned.noise, windows=windows,
                                   first=lambda y1, _s1: prepare(y1)(chosen), first_outputs=tuned.first_outputs)
        info.update(chosen={**chosen.to_dict(), "second_stage": stage["stage"], "second_stage_risks": stage["risks"]},
                    noise=tuned.noise, noise_estimated=True, candidates=len(tuned.risks), second_stage=stage)
        return from_unit(out, unit_info), info

    return _run(progress, work, keep=background)


def denoise_with_own_models(data_dir: str, image: np.ndarray, patch: int = 7, stride: int = 1,
                            tile: int | None = 32, tune: str = "auto", fixed: dict | None = None,
                            noise: float | None = None, job: str | None = None,
                            second_stage: bool | str = "auto", stop: str | None = None,
                            background: bool = False) -> tuple[np.ndarray, dict]:
    """The one-call path: a decoded PNG's pixels denoised by kernel PCA models of its own tiles
    (`kpca.images.denoising.denoise_image`), with the kernel width, rank and pre-image tuned on the image
    (`kpca.images.tuning.tune_patches`; ``fixed`` values and ``noise``, if given, kept), followed by the Wiener
    second stage, or a variant of it, where its estimated risk is lower (`kpca.images.second_stage`; ``"auto"`` or True;
    ``"wiener"``: always; ``"off"`` or False: the first stage alone, as before issue 27). ``tune="off"``:
    the values of ``fixed`` over `PatchSettings`' defaults, and ``"auto"`` is off. Returns the image
    (input's dtype) and ``info``, whose ``chosen`` includes ``sigma``, the kernel width used,
    ``second_stage`` (``"wiener"``, a variant's name or None) and ``second_stage_risks`` (None where not
    estimated). ``stop``: the request's stop flag (`store.stop_flags`), looked at at each tuning candidate
    and tile (`Stopped` when raised). ``background``: the job ``job``, whose record its request started,
    keeps the answer in the image job store before it is marked completed (`store.image_jobs`)."""
    choice = stage_choice(second_stage)
    progress = JobProgress(data_dir, job, "denoise-image-fit", stop, started=background)

    def work():
        unit, unit_info = to_unit(image)
        fixed_values = {k: v for k, v in (fixed or {}).items() if v not in (None, {})}
        base = PatchSettings(patch=patch, stride=stride, tile=tile)
        noise_level_used, estimated = noise, noise is None
        if estimated:
            with progress.step("noise"):
                grey = unit.mean(axis=2) if unit.ndim == 3 else unit
                noise_level_used = noise_level(grey)
        sigma = fixed_values.pop("sigma", None)
        if sigma is not None and fixed_values.get("method") == LINEAR:
            raise ValueError("sigma: method 'linear' has no kernel width; leave sigma out")
        if sigma is not None:  # an explicit kernel width, as the width (D1) at this noise level
            fixed_values["width"] = base.width_for(sigma, noise_level_used)
        if tune == "auto":
            with progress.step("tuning"):
                tuned = tune_patches(unit, base, fixed_values, noise_level_used, report=progress.report)
                if choice == "auto":
                    tuned = choose_second_stage(unit, tuned)
            settings, extra = tuned.settings, {"candidates": len(tuned.risks), "risks": tuned.risks}
        else:
            settings = PatchSettings(**{**base.__dict__, **{k: v for k, v in fixed_values.items()
                                                           if k in base.__dict__}})
            if settings.method == LINEAR:  # no kernel, so no width
                settings = replace(settings, width=None)
            tuned, extra = None, {}
        estimate = (tuned.second_stage if tuned is not None else None) or {"stage": None, "risks": None}
        stage = WIENER if choice == WIENER else estimate["stage"]
        extra["second_stage"] = {"stage": stage, "risks": estimate["risks"]}
        with progress.step("denoising"):
            out = denoise_image(unit, settings, noise_level_used, report=progress.report)
        if stage is not None:
            with progress.step("second stage"):
                out = apply_second_stage(unit, out, settings, noise_level_used, stage, progress.report)
        chosen = {**settings.to_dict(), "sigma": sigma if sigma is not None else settings.sigma(noise_level_used),
                  "second_stage": stage, "second_stage_risks": estimate["risks"]}
        info = {"tune": tune, "chosen": chosen, "noise": noise_level_used, "noise_estimated": estimated, **extra}
        return from_unit(out, unit_info), info

    return _run(progress, work, keep=background)


def denoise_rows_tuned(data_dir: str, model_name: str, rows: np.ndarray, fixed: dict | None = None,
                       stop: str | None = None) -> tuple[np.ndarray, dict]:
    """Rows through a stored model with the rank and pre-image chosen by `kpca.images.model_tuning.tune_model` on the
    rows themselves (their noise estimated from their covariance, `kpca.images.noise_level.noise_level_rows`:
    it needs more rows than columns). ``stop``: the request's stop flag (`store.stop_flags`), looked at
    after each candidate and before the pre-images (`Stopped` when raised). Returns the rows and ``info``."""
    progress = JobProgress(data_dir, None, "denoise", stop)

    def work():
        model = load_model(data_dir, model_name).model
        values = np.asarray(rows, dtype=np.float64)
        learned: dict = {}

        def prepare(y):  # the candidates share the rows' projections (`kpca.images.tile_preimages`)
            shared = TilePreimages(model, y, learned=learned)
            return lambda c: shared.preimages(c.n_components, c.method, c.options, stop=progress.asked_to_stop)

        with progress.step("tuning"):
            tuned = tune_model(model, [values], None, fixed, noise_of=noise_level_rows, report=progress.report,
                               prepare=prepare)
        chosen = tuned.settings
        with progress.step("denoising"):
            out = preimages(leading(model, chosen.n_components), values, chosen.method, chosen.options,
                            progress.asked_to_stop)
        return out, {"tune": "auto", "chosen": chosen.to_dict(), "noise": tuned.noise, "noise_estimated": True}

    return _run(progress, work)
