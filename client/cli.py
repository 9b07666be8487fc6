"""``kpca``: the command line of kpca-stream, over its HTTP API (`client.api.Client`).

Every command but ``serve`` talks HTTP only; ``serve`` starts the service as a process of its own
(``python -m service``, `run_service`), so the client never imports the service's packages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import click
import numpy as np

from client.api import DEFAULT_URL, KINDS, RUNNING, ApiError, Client, ConnectionFailed, load_npy, save_npy

#: exit statuses (also listed in ``kpca --help``)
OK, REFUSED, USAGE, UNREACHABLE, FIT_FAILED, SERVER_ERROR = 0, 1, 2, 3, 4, 5

EPILOG = """\b
Exit status:
  0  done
  1  the server said no (4xx): its message and the field it names are printed
  2  usage error (unknown option, missing argument)
  3  cannot connect to the server (see --url)
  4  the fit failed or was cancelled (watch, fit --wait)
  5  server error (5xx)
"""

#: singular spellings accepted by ``rm`` and ``ls``
SINGULAR = {kind[:-1]: kind for kind in KINDS}


class Group(click.Group):
    """A click group that turns the client's errors into messages and `EPILOG`'s exit statuses."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ApiError as exc:
            where = f" [field: {exc.field}]" if exc.field else ""
            _fail(ctx, f"error: {exc.message}{where} (HTTP {exc.status} {exc.code})",
                  {"status": exc.status, "code": exc.code, "message": exc.message, "field": exc.field},
                  SERVER_ERROR if exc.status >= 500 else REFUSED)
        except ConnectionFailed as exc:
            _fail(ctx, f"error: {exc}", {"code": "connection_failed", "message": str(exc)}, UNREACHABLE)


def _fail(ctx: click.Context, text: str, error: dict, status: int) -> None:
    obj = ctx.find_object(State)
    if obj is not None and obj.json:
        click.echo(json.dumps({"error": error}))
    click.echo(text, err=True)
    ctx.exit(status)


class State:
    """The global options, shared by every command."""

    def __init__(self, url: str, api_key: str | None, json_output: bool):
        self.url, self.api_key, self.json = url, api_key, json_output
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.url, self.api_key)
        return self._client

    def emit(self, data, text: str | None = None) -> None:
        """Print ``data`` as JSON (``--json``) or ``text`` for people."""
        if self.json:
            click.echo(json.dumps(data))
        elif text is not None:
            click.echo(text)


pass_state = click.make_pass_decorator(State)


@click.group(cls=Group, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar="KPCA_URL", default=DEFAULT_URL, show_default=True,
              help="base URL of the kpca-stream service (env KPCA_URL)")
@click.option("--api-key", envvar="KPCA_API_KEY", default=None,
              help="API key, sent as 'Authorization: Bearer KEY' (env KPCA_API_KEY)")
@click.option("--json", "json_output", is_flag=True, help="machine-readable JSON on stdout instead of text")
@click.pass_context
def cli(ctx: click.Context, url: str, api_key: str | None, json_output: bool) -> None:
    """kpca-stream from the command line: upload data, fit kernel PCA, watch fits, project and denoise, export
    and import models."""
    ctx.obj = State(url, api_key, json_output)
    ctx.call_on_close(lambda: ctx.obj._client and ctx.obj._client.close())


@cli.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("options", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def serve(ctx: click.Context, options) -> None:
    """Run the service here with OPTIONS (the same as ``python -m service``: ``kpca serve --help``
    lists them, e.g. --host, --port, --data-dir, --scheduler); needs the server's packages. Exits with
    the service's status; Ctrl-C stops the service."""
    ctx.exit(run_service(list(options)))


#: what the CLI passes on to the service it runs (SIGINT: see `run_service`)
FORWARDED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def run_service(argv: list[str]) -> int:
    """Run ``python -m service ARGV`` (this interpreter) as a child process until it ends; its exit status
    (128 + N for a child ended by signal N, as a shell reports it).

    Signals reach the service as if it had been started by itself. Ctrl-C in a terminal interrupts
    the whole foreground process group, the service included, so the first SIGINT the CLI gets is not
    passed on (a second one would make uvicorn skip its graceful shutdown); a later SIGINT, or any
    SIGINT when the child runs in another process group, is. SIGTERM and SIGHUP are passed on at once.
    The CLI waits for the service to finish its shutdown either way. Cost: one process start.
    """
    child: subprocess.Popen | None = None
    interrupts = 0

    def forward(signum, _frame) -> None:
        nonlocal interrupts
        if child is None:
            return
        if signum == signal.SIGINT:
            interrupts += 1
            if interrupts == 1 and _same_process_group(child.pid):
                return  # the terminal sent it to the service too
        try:
            child.send_signal(signum)
        except ProcessLookupError:  # it has just ended
            pass

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        child = subprocess.Popen([sys.executable, "-m", "service", *argv])
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - status if status < 0 else status


def _same_process_group(pid: int) -> bool:
    """Whether process ``pid`` is in this process's group (True where process groups do not exist)."""
    try:
        return os.getpgid(pid) == os.getpgrp()
    except AttributeError:  # not on POSIX: a console's Ctrl-C reaches every process attached to it
        return True
    except ProcessLookupError:
        return False


@cli.command()
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--chunk-rows", type=click.IntRange(min=1), default=None,
              help="rows per request (default: about 8 MiB per request)")
@click.option("--append", is_flag=True, help="add the rows as the data set's next version")
@pass_state
def upload(state: State, name: str, file: str, chunk_rows: int | None, append: bool) -> None:
    """Upload FILE (a 2-D .npy array, one row per sample) as data set NAME, resumably, and commit it."""
    meta = state.client.upload(name, load_npy(file), chunk_rows=chunk_rows, append=append,
                               progress=not state.json)
    state.emit(meta, f"{name}: {meta.get('n_rows')} rows x {meta.get('n_features')} features, "
               f"version {meta.get('version')}, {meta.get('status')}")


@cli.command("upload-image")
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


def _param(value: str):
    key, sep, raw = value.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{value!r} is not KEY=VALUE")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


@cli.command()
@click.argument("name")
@click.option("--dataset", required=True, help="the data set to fit on (uploaded and committed)")
@click.option("--kernel", default="gaussian", show_default=True, help="kernel type (see GET /v1/kernels)")
@click.option("--sigma", type=float, default=None, help="Gaussian kernel width")
@click.option("--kernel-param", "kernel_params", multiple=True, metavar="KEY=VALUE",
              help="another kernel parameter (repeatable), e.g. --kernel-param degree=3")
@click.option("--components", "n_components", type=click.IntRange(min=1), required=True,
              help="number of kernel principal components")
@click.option("--solver", default="kha-smd", show_default=True, help="solver (see GET /v1/solvers)")
@click.option("--passes", type=click.IntRange(min=1), default=None, help="passes over the data")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="a solver parameter (repeatable; VALUE read as JSON where it parses), e.g. --param eta0=0.05")
@click.option("--wait", is_flag=True, help="follow the fit (as `watch`) until it ends")
@pass_state
@click.pass_context
def fit(ctx, state: State, name, dataset, kernel, sigma, kernel_params, n_components, solver, passes, params,
        wait) -> None:
    """Create model NAME and start fitting it on --dataset."""
    kernel_spec = {"type": kernel, **dict(_param(p) for p in kernel_params)}
    if sigma is not None:
        kernel_spec["sigma"] = sigma
    solver_params = dict(_param(p) for p in params)
    if passes is not None:
        solver_params["passes"] = passes
    record = state.client.fit(name, dataset, kernel_spec, n_components, solver, solver_params)
    state.emit(record, f"{name}: {record['status']} ({solver}, {n_components} components on {dataset})")
    if wait:
        ctx.invoke(watch, name=name)


def _bar_line(name: str, passes: int | None, event: dict, started: dict) -> str:
    done = int(event.get("pass", 0))
    total = event.get("passes") or passes
    remaining = event.get("remaining_s")
    if remaining is None and total and done:
        remaining = float(event.get("elapsed_s", 0.0)) / done * (int(total) - done)
    convergence = event.get("convergence") or {}
    value = convergence.get("value")
    width = 24
    filled = int(width * done / total) if total else 0
    bar = "#" * filled + "-" * (width - filled)
    parts = [f"{name} [{bar}] pass {done}/{total or '?'}"]
    if value is not None:
        parts.append(f"{convergence.get('metric', 'convergence')} {value:.3g}")
    if remaining is not None:
        parts.append(f"~{remaining:.0f} s left")
    started["passes"] = total
    return "  ".join(parts)


@cli.command()
@click.argument("name")
@pass_state
@click.pass_context
def watch(ctx, state: State, name: str) -> None:
    """Follow model NAME's fit live (pass, convergence, remaining time) from its events stream.

    Exits 0 when the fit completes, 4 when it failed or was cancelled. With --json, one JSON line
    per event."""
    record = state.client.model(name)
    passes = (record.get("progress") or {}).get("passes") or (record.get("params") or {}).get("passes")
    status, info, live = record["status"], {}, sys.stderr.isatty() and not state.json
    for event, data in state.client.events(name):
        if state.json:
            click.echo(json.dumps({"event": event, **data}))
        if event == "progress" and not state.json:
            line = _bar_line(name, passes, data, info)
            click.echo(("\r" + line) if live else line, err=True, nl=not live)
        elif event in ("status", "end"):
            status = data.get("status", status)
            if data.get("error"):
                info["error"] = data["error"]
    if live:
        click.echo("", err=True)
    if status in RUNNING:  # the stream closed early: read where the fit stands
        status = state.client.wait(name)["status"]
    if not state.json:
        click.echo(f"{name}: {status}")
    if status != "completed":
        error = info.get("error") or state.client.model(name).get("error") or {}
        if error.get("message"):
            click.echo(f"error: {error['message']} ({error.get('code')})", err=True)
        ctx.exit(FIT_FAILED)


def _write_or_print(state: State, array: np.ndarray, out: str | None, key: str) -> None:
    if out is not None:
        save_npy(out, array)
        state.emit({"output": out, "shape": list(array.shape)}, f"wrote {out} {array.shape}")
    elif state.json:
        click.echo(json.dumps({key: array.tolist()}))
    else:
        np.savetxt(sys.stdout, array, fmt="%.8g")


@cli.command()
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), default=None,
              help="write the components to this .npy file (default: print them)")
@pass_state
def project(state: State, name: str, file: str, out: str | None) -> None:
    """Kernel principal components of FILE's rows (a .npy array) through model NAME."""
    _write_or_print(state, state.client.project(name, load_npy(file)), out, "components")


@cli.command()
@click.argument("name")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True,
              help="the .npy file that receives the denoised rows")
@click.option("--method", default="auto", show_default=True, help="pre-image method")
@pass_state
def denoise(state: State, name: str, file: str, out: str, method: str) -> None:
    """Denoise FILE's rows (a .npy array) through model NAME: pre-images of their projections."""
    _write_or_print(state, state.client.denoise(name, load_npy(file), method), out, "rows")


@cli.command("denoise-image")
@click.argument("name")
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True, help="the denoised PNG")
@click.option("--patch", type=click.IntRange(min=1), default=None,
              help="the patch side you expect; the model fixes it (its rows are patch x patch x channels "
                   "values), so this only checks it before sending the image")
@click.option("--stride", type=click.IntRange(1, 64), default=2, show_default=True,
              help="grid step between patches, at most the patch side")
@click.option("--method", default="auto", show_default=True, help="pre-image method")
@click.option("--upscale", type=click.IntRange(1, 8), default=1, show_default=True,
              help="enlarge the image this many times first (hyperresolution)")
@click.option("--compare", is_flag=True, help="write a picture of the input and the denoised image side by side")
@click.option("--tune", type=click.Choice(["auto", "off"]), default="auto", show_default=True,
              help="auto: choose the rank and pre-image from the image itself (explicit --method kept)")
@click.option("--n-components", type=click.IntRange(min=1), default=None,
              help="use this many of the model's leading components (default: tuned, or all)")
@pass_state
def denoise_image(state: State, name: str, image: str, out: str, patch: int | None, stride: int, method: str,
                  upscale: int, compare: bool, tune: str, n_components: int | None) -> None:
    """Denoise the PNG IMAGE patch by patch through model NAME (trained on image patches); says what
    the tuning chose."""
    if patch is not None:
        n_features = int(state.client.model(name)["n_features"])
        if all(patch * patch * channels != n_features for channels in (1, 3, 4)):
            raise click.BadParameter(f"model {name!r} takes rows of {n_features} values, which are not "
                                     f"{patch}x{patch} patches (grey, RGB or RGBA)", param_hint="--patch")
    png, chosen = state.client.denoise_image_chosen(name, Path(image).read_bytes(), stride, method, upscale, compare,
                                                    tune, n_components)
    Path(out).write_bytes(png)
    said = ", ".join(f"{key} {value}" for key, value in chosen.items() if key in ("method", "n_components", "noise"))
    state.emit({"output": out, "bytes": len(png), "chosen": chosen}, f"wrote {out}" + (f" ({said})" if said else ""))


@cli.command("export")
@click.argument("name")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), required=True,
              help="the archive file to write (a tar; written whole or not at all)")
@pass_state
def export_(state: State, name: str, out: str) -> None:
    """Download completed model NAME as one archive (record, checkpoint, training rows, manifest) that
    `kpca import` loads into this or another service."""
    done = state.client.export_model(name, out)
    state.emit({"model": name, **done}, f"wrote {out} ({done['bytes']} bytes): model {name}")


@cli.command("import")
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


def _kind(value: str) -> str:
    kind = SINGULAR.get(value, value)
    if kind not in KINDS:
        raise click.BadParameter(f"must be one of {', '.join(KINDS)}", param_hint="KIND")
    return kind


def _summary(kind: str, item: dict) -> str:
    if kind == "datasets":
        return f"{item['name']}\t{item.get('status')}\t{item.get('n_rows')}x{item.get('n_features')}"
    progress = item.get("progress") or {}
    done = f"pass {progress.get('pass')}/{progress.get('passes')}" if progress else ""
    return f"{item['name']}\t{item.get('status')}\t{item.get('dataset')}\t{item.get('solver', '')}\t{done}".rstrip()


@cli.command()
@click.argument("kind", default="models", metavar="[datasets|models|clusterings]")
@pass_state
def ls(state: State, kind: str) -> None:
    """List data sets, models (the default) or clusterings."""
    kind = _kind(kind)
    items = state.client.ls(kind)
    state.emit(items, "\n".join(_summary(kind, item) for item in items) if items else f"no {kind}")


@cli.command()
@click.argument("kind", metavar="KIND")
@click.argument("name")
@pass_state
def rm(state: State, kind: str, name: str) -> None:
    """Delete data set, model or clustering NAME (KIND: datasets, models or clusterings)."""
    kind = _kind(kind)
    state.client.rm(kind, name)
    state.emit({"deleted": name, "kind": kind}, f"deleted {kind[:-1]} {name}")


def main() -> None:
    """Entry point of the ``kpca`` console script."""
    cli(prog_name="kpca")
