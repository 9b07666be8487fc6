"""The ``kpca`` commands of stored things: ``upload``, ``upload-image``, ``ls``, ``rm``, ``export``, ``import``."""

from __future__ import annotations

from pathlib import Path

import click

from client.api import KINDS
from client.cli_base import State, pass_state
from client.files import BadFile, load_table


def read_table(file: str):
    """The rows of FILE (`client.files.load_table`); a file that is not a table of numbers is a usage error
    (exit status 2) naming the file, the line and what to give instead."""
    try:
        return load_table(file)
    except BadFile as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from None


#: singular spellings accepted by ``rm``, ``ls`` and ``show``
SINGULAR = {kind[:-1]: kind for kind in KINDS}


@click.command()
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--chunk-rows", type=click.IntRange(min=1), default=None,
              help="rows per request (default: about 8 MiB per request)")
@click.option("--append", is_flag=True, help="add the rows as the data set's next version")
@pass_state
def upload(state: State, name: str, file: str, chunk_rows: int | None, append: bool) -> None:
    """Upload FILE (a 2-D .npy array, or a CSV of numbers with an optional header line; one row per sample)
    as data set NAME, resumably, and commit it. The same rows again (however they were cut into chunks)
    change nothing."""
    meta = state.client.upload(name, read_table(file), chunk_rows=chunk_rows, append=append,
                               progress=not state.json)
    unchanged = " (unchanged: the set already held these rows; nothing was sent)" if meta.get("unchanged") else ""
    state.emit(meta, f"{name}: {meta.get('n_rows')} rows x {meta.get('n_features')} features, "
               f"version {meta.get('version')}, {meta.get('status')}{unchanged}")


@click.command("upload-image")
@click.argument("name")
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@click.option("--patch", type=click.IntRange(2, 64), default=11, show_default=True,
              help="patch side in pixels: each row of the data set is one patch x patch patch")
@click.option("--stride", type=click.IntRange(1, 64), default=2, show_default=True,
              help="grid step between patches (1: every patch; larger: fewer rows)")
@pass_state
def upload_image(state: State, name: str, image: str, patch: int, stride: int) -> None:
    """Create data set NAME from the patches of the PNG IMAGE (pixels scaled to [0, 1]), ready to fit
    a model that `denoise-image` then uses."""
    meta = state.client.upload_image(name, Path(image).read_bytes(), patch, stride)
    state.emit(meta, f"{name}: {meta.get('n_rows')} patches of {patch}x{patch} "
               f"({meta.get('n_features')} values each), {meta.get('status')}")


def kind_of(value: str) -> str:
    """``datasets``, ``models`` or ``clusterings`` from a plural or singular spelling; a usage error otherwise."""
    kind = SINGULAR.get(value, value)
    if kind not in KINDS:
        raise click.BadParameter(f"must be one of {', '.join(KINDS)}", param_hint="KIND")
    return kind


#: the columns of `ls` for each kind: (header, the value of an item)
COLUMNS = {
    "datasets": (("NAME", lambda i: i["name"]), ("STATUS", lambda i: i.get("status")),
                 ("ROWS", lambda i: i.get("n_rows")), ("FEATURES", lambda i: i.get("n_features")),
                 ("VERSION", lambda i: i.get("version"))),
    "jobs": (("NAME", lambda i: i["name"]), ("STATUS", lambda i: i.get("status")),
             ("DATASET", lambda i: i.get("dataset")), ("SOLVER", lambda i: i.get("solver", "")),
             ("PASSES", lambda i: _passes(i.get("progress") or {}, i.get("status")))),
}


def _passes(progress: dict, status: str | None = None) -> str:
    """A fit's passes as ``done/asked`` (``done`` alone where none were asked), "" before the first; a fit
    completed before its asked passes says why, as the dashboard does: ``0, exact start`` (served from its
    start, no pass needed) or ``N, converged``."""
    done, asked = progress.get("pass"), progress.get("passes")
    if done is None:
        return ""
    if status == "completed" and asked and done < asked:
        return "0, exact start" if done == 0 else f"{done}, converged"
    return f"{done}/{asked}" if asked else str(done)


def table(kind: str, items: list[dict]) -> str:
    """``ls``'s text: a header row, then one row per item, in columns padded to their widths."""
    columns = COLUMNS["datasets" if kind == "datasets" else "jobs"]
    rows = [[header for header, _ in columns]] + [["" if get(item) is None else str(get(item))
                                                   for _, get in columns] for item in items]
    widths = [max(len(row[j]) for row in rows) for j in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


@click.command()
@click.argument("kind", default="models", metavar="[datasets|models|clusterings]")
@pass_state
def ls(state: State, kind: str) -> None:
    """List data sets, models (the default) or clusterings."""
    kind = kind_of(kind)
    items = state.client.ls(kind)
    state.emit(items, table(kind, items) if items else f"no {kind}")


@click.command()
@click.argument("kind", metavar="KIND")
@click.argument("name")
@click.option("--cascade", is_flag=True,
              help="(data sets) delete the models and clusterings that use it too, stopping their fits")
@pass_state
def rm(state: State, kind: str, name: str, cascade: bool) -> None:
    """Delete data set, model or clustering NAME (KIND: datasets, models or clusterings)."""
    kind = kind_of(kind)
    if cascade and kind != "datasets":
        raise click.BadParameter("only a data set has models and clusterings to delete with it", param_hint="--cascade")
    state.client.rm(kind, name, cascade=cascade)
    what = {"datasets": "data set", "models": "model", "clusterings": "clustering"}[kind]
    state.emit({"deleted": name, "kind": kind}, f"deleted {what} {name}" + (" and what used it" if cascade else ""))


@click.command("export")
@click.argument("name")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True,
              help="the archive file to write (a tar; written whole or not at all)")
@pass_state
def export_(state: State, name: str, out: str) -> None:
    """Download completed model NAME as one archive (record, checkpoint, training rows, manifest) that
    `kpca import` loads into this or another service."""
    done = state.client.export_model(name, out)
    state.emit({"model": name, **done}, f"wrote {out} ({done['bytes']} bytes): model {name}")


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", default=None, help="import the model under this name (default: the archive's)")
@click.option("--dataset", default=None,
              help="name of the data set for its training rows (default: the archive's); an existing set "
                   "with the same rows is reused")
@pass_state
def import_(state: State, file: str, name: str | None, dataset: str | None) -> None:
    """Create a completed model from FILE, an archive written by `kpca export`."""
    record = state.client.import_model(file, name=name, dataset=dataset)
    state.emit(record, f"{record['name']}: {record['status']} (imported from {file}; data set "
               f"{record['dataset']} version {record.get('dataset_version')})")


COMMANDS = (upload, upload_image, ls, rm, export_, import_)
