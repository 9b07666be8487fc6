"""The ``kpca`` commands that run data through a model: ``project``, ``denoise``, ``denoise-image``; and
``denoise-fit``, a PNG denoised by models of its own patches (no model needed)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import click
import numpy as np

from client.api import save_npy
from client.cli_base import State, pass_state
from client.cli_data import read_table

METHOD_HELP = "pre-image method: auto, fixed-point, kwok-tsang, gradient or learned (docs/denoising.md)"


def _write_or_print(state: State, array: np.ndarray, out: str | None, key: str) -> None:
    if out is not None:
        save_npy(out, array)
        state.emit({"output": out, "shape": list(array.shape)}, f"wrote {out} {array.shape}")
    elif state.json:
        click.echo(json.dumps({key: array.tolist()}))
    else:
        np.savetxt(sys.stdout, array, fmt="%.8g")


@click.command()
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None,
              help="write the components to this .npy file (default: print them)")
@pass_state
def project(state: State, name: str, file: str, out: str | None) -> None:
    """Kernel principal components of FILE's rows (a .npy array or a CSV of numbers) through model NAME."""
    _write_or_print(state, state.client.project(name, read_table(file)), out, "components")


@click.command()
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True,
              help="the .npy file that receives the denoised rows")
@click.option("--method", default="auto", show_default=True, help=METHOD_HELP)
@pass_state
def denoise(state: State, name: str, file: str, out: str, method: str) -> None:
    """Denoise FILE's rows (a .npy array or a CSV) through model NAME: pre-images of their projections."""
    _write_or_print(state, state.client.denoise(name, read_table(file), method), out, "rows")


@click.command("denoise-image")
@click.argument("name")
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True, help="the denoised PNG")
@click.option("--patch", type=click.IntRange(min=1), default=None,
              help="the patch side you expect; the model fixes it (its rows are patch x patch x channels "
                   "values), so this only checks it before sending the image")
@click.option("--stride", type=click.IntRange(1, 64), default=2, show_default=True,
              help="grid step between patches, at most the patch side")
@click.option("--method", default="auto", show_default=True, help=METHOD_HELP)
@click.option("--upscale", type=click.IntRange(1, 8), default=1, show_default=True,
              help="enlarge the image this many times first (hyperresolution)")
@click.option("--compare", is_flag=True, help="write a picture of the input and the denoised image side by side")
@click.option("--tune", type=click.Choice(["auto", "off"]), default="auto", show_default=True,
              help="auto: choose the rank and pre-image from the image itself (explicit --method kept)")
@click.option("--n-components", type=click.IntRange(min=1), default=None,
              help="use this many of the model's leading components (default: tuned, or all)")
@click.option("--second-stage", type=click.Choice(["auto", "wiener", "off"]), default="auto", show_default=True,
              help="the Wiener second stage: auto keeps it where it is estimated to help (with --tune auto); "
                   "wiener: always; off: never")
@pass_state
def denoise_image(state: State, name: str, image: str, out: str, patch: int | None, stride: int, method: str,
                  upscale: int, compare: bool, tune: str, n_components: int | None, second_stage: str) -> None:
    """Denoise the PNG IMAGE patch by patch through model NAME (trained on image patches); says what
    the tuning chose."""
    if patch is not None:
        n_features = int(state.client.model(name)["n_features"])
        if all(patch * patch * channels != n_features for channels in (1, 3, 4)):
            raise click.BadParameter(f"model {name!r} takes rows of {n_features} values, which are not "
                                     f"{patch}x{patch} patches (grey, RGB or RGBA)", param_hint="--patch")
    png, chosen = state.client.denoise_image_chosen(name, Path(image).read_bytes(), stride, method, upscale, compare,
                                                    tune, n_components, second_stage)
    Path(out).write_bytes(png)
    said = chosen_words(chosen)
    state.emit({"output": out, "bytes": len(png), "chosen": chosen}, f"wrote {out}" + (f" ({said})" if said else ""))


def chosen_words(chosen: dict) -> str:
    """What a denoising chose, for people: ``pre-image fixed-point, 8 components, noise 0.097 (estimated), second
    stage wiener`` (no Python values: ``None`` is "no second stage")."""
    words = []
    if chosen.get("method"):
        words.append(f"pre-image {chosen['method']}" if chosen["method"] != "linear" else "linear PCA")
    if chosen.get("n_components") is not None:
        words.append(f"{chosen['n_components']} components")
    if chosen.get("noise") is not None:
        words.append(f"noise {float(chosen['noise']):.3g}" + (" (estimated)" if chosen.get("noise_estimated") else ""))
    if "second_stage" in chosen:
        words.append(f"second stage {chosen['second_stage']}" if chosen["second_stage"] else "no second stage")
    return ", ".join(words)


def progress_line(record: dict) -> str:
    """An image job's progress for people: its step, units done, seconds and the step's time left; once
    ended, its status and seconds."""
    if record["status"] != "running":
        return f"{record['status']}, {record['elapsed_s']:.1f} s"
    units = f" {record['done']}/{record['total']}" if record.get("total") else ""
    left = record.get("step_left_s")
    return (f"{record['phase']}{units}, {record['elapsed_s']:.1f} s"
            + (f", about {left:.0f} s left in this step" if left is not None else ""))


@click.command("denoise-fit")
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True, help="the denoised PNG")
@click.option("--patch", type=click.IntRange(3, 16), default=None, help="patch side (default: the service's, 7)")
@click.option("--stride", type=click.IntRange(1, 16), default=None, help="grid step (default: the service's, 1)")
@click.option("--tile", type=click.IntRange(0, 4096), default=None,
              help="side of the tiles that get a model each (default: the service's, 32; 0: one model)")
@click.option("--second-stage", type=click.Choice(["auto", "wiener", "off"]), default="auto", show_default=True,
              help="the Wiener second stage: auto keeps it where it is estimated to help")
@click.option("--job", default=None, help="the image job's name (default: a new one)")
@pass_state
def denoise_fit(state: State, image: str, out: str, patch: int | None, stride: int | None, tile: int | None,
                second_stage: str, job: str | None) -> None:
    """Denoise the PNG IMAGE with nothing but the image: kernel PCA models of its own patches, every
    parameter chosen from it (POST /v1/denoise-image). Runs as a background image job, its progress on
    stderr (step, units done, seconds, the step's time left), so a large image is not cut off by the
    serving deadline; says what was chosen."""
    job = job or f"cli-{uuid.uuid4().hex[:12]}"
    live = sys.stderr.isatty() and not state.json
    started = time.monotonic()

    def show(record: dict) -> None:
        if not state.json:
            click.echo(("\r" if live else "") + progress_line(record), err=True, nl=not live)

    png, chosen = state.client.denoise_photo(Path(image).read_bytes(), job, show, patch=patch, stride=stride,
                                             tile=tile, second_stage=second_stage)
    if live:
        click.echo("", err=True)
    Path(out).write_bytes(png)
    seconds = time.monotonic() - started
    shown = ("method", "n_components", "noise", "second_stage")
    said = ", ".join(f"{key} {value}" for key, value in chosen.items() if key in shown)
    state.emit({"output": out, "bytes": len(png), "seconds": seconds, "job": job, "chosen": chosen},
               f"wrote {out} in {seconds:.1f} s" + (f" ({said})" if said else ""))


COMMANDS = (project, denoise, denoise_image, denoise_fit)
