"""The ``kpca`` commands of jobs: ``fit``, ``watch``, ``cancel``, ``resume`` (models and clusterings) and
``cluster``. A job name given to ``cancel`` or ``resume`` is a model's, else a clustering's."""

from __future__ import annotations

import json
import sys
import time

import click

from client.api import RUNNING
from client.cli_base import (
    FIT_FAILED,
    State,
    bar,
    kernel_options,
    kernel_spec,
    pass_state,
    solver_options,
    solver_params,
)

#: seconds between two looks at a clustering (`cluster --wait`; clusterings have no events stream)
POLL_S = 0.5


@click.command()
@click.argument("name")
@click.option("--dataset", required=True, help="the data set to fit on (uploaded and committed)")
@kernel_options
@click.option("--components", "n_components", type=click.IntRange(min=1), required=True,
              help="number of kernel principal components")
@solver_options
@pass_state
@click.pass_context
def fit(ctx, state: State, name, dataset, kernel, sigma, kernel_params, n_components, solver, passes, params,
        wait) -> None:
    """Create model NAME and start fitting it on --dataset."""
    record = state.client.fit(name, dataset, kernel_spec(kernel, sigma, kernel_params), n_components, solver,
                              solver_params(params, passes))
    state.emit(record, f"{name}: {record['status']} ({solver}, {n_components} components on {dataset})")
    if wait:
        ctx.invoke(watch, name=name)


def _bar_line(name: str, passes: int | None, event: dict) -> str:
    done = int(event.get("pass", 0))
    total = event.get("passes") or passes
    remaining = event.get("remaining_s")
    if remaining is None and total and done:
        remaining = float(event.get("elapsed_s", 0.0)) / done * (int(total) - done)
    convergence = event.get("convergence") or {}
    value = convergence.get("value")
    parts = [f"{name} {bar(done, total)} pass {done}/{total or '?'}"]
    if value is not None:
        parts.append(f"{convergence.get('metric', 'convergence')} {value:.3g}")
    if event.get("elapsed_s") is not None:
        parts.append(f"{float(event['elapsed_s']):.0f} s in")
    if remaining is not None:
        parts.append(f"~{remaining:.0f} s left")
    return "  ".join(parts)


def _ended(ctx, state: State, name: str, status: str, error: dict | None) -> None:
    """Say how job ``name`` ended; exit 4 unless it completed."""
    if not state.json:
        click.echo(f"{name}: {status}")
    if status != "completed":
        if error and error.get("message"):
            click.echo(f"error: {error['message']} ({error.get('code')})", err=True)
        ctx.exit(FIT_FAILED)


@click.command()
@click.argument("name")
@pass_state
@click.pass_context
def watch(ctx, state: State, name: str) -> None:
    """Follow model NAME's fit live (pass, convergence, time spent and left) from its events stream.

    Exits 0 when the fit completes, 4 when it failed or was cancelled. With --json, one JSON line
    per event."""
    follow(ctx, state, name)


def follow(ctx, state: State, name: str, after_pass: int = 0) -> None:
    """`watch`'s work: the fit's passes after ``after_pass`` (a resumed fit's new ones; 0: its whole history
    first), then how it ended."""
    record = state.client.model(name)
    passes = (record.get("params") or {}).get("passes") or (record.get("progress") or {}).get("passes")
    status, error, live = record["status"], None, sys.stderr.isatty() and not state.json
    for event, data in state.client.events(name, after_pass):
        if state.json:
            click.echo(json.dumps({"event": event, **data}))
        if event == "progress" and not state.json:
            line = _bar_line(name, passes, data)
            click.echo(("\r" + line) if live else line, err=True, nl=not live)
        elif event in ("status", "end"):
            status = data.get("status", status)
            error = data.get("error") or error
    if live:
        click.echo("", err=True)
    if status in RUNNING:  # the stream closed early: read where the fit stands
        status = state.client.wait(name)["status"]
    if status != "completed" and not error:
        error = state.client.model(name).get("error")
    _ended(ctx, state, name, status, error)


def _wait_clustering(ctx, state: State, name: str) -> None:
    """Poll clustering ``name`` until it ends, a line per pass on stderr; then `_ended`."""
    seen = 0
    while True:
        record = state.client.clustering(name)
        progress = record.get("progress") or {}
        done = int(progress.get("pass") or 0)
        if done > seen and not state.json:
            seen = done
            change = (record.get("history") or [{}])[-1].get("labels_change")
            words = f"  labels change {change:.3g}" if isinstance(change, (int, float)) else ""
            click.echo(f"{name} {bar(done, progress.get('passes'))} pass {done}/{progress.get('passes') or '?'}{words}",
                       err=True)
        if record["status"] not in RUNNING:
            break
        time.sleep(POLL_S)
    if state.json:
        click.echo(json.dumps(record))
    elif record["status"] == "completed":
        vi = record.get("variation_of_information")
        labels = record.get("labels_total") or record.get("n_rows")
        click.echo(f"{name}: {labels} labels in {record.get('n_clusters')} clusters"
                   + (f", variation of information {vi:.3g} against the reference" if vi is not None else ""))
    _ended(ctx, state, name, record["status"], record.get("error"))


@click.command()
@click.argument("name")
@click.option("--dataset", required=True, help="the data set to cluster (uploaded and committed)")
@click.option("--clusters", "n_clusters", type=click.IntRange(min=2), required=True, help="number of clusters")
@kernel_options
@solver_options
@click.option("--labels-dataset", default=None,
              help="a one-column data set of reference labels: each pass then reports its variation of information")
@pass_state
@click.pass_context
def cluster(ctx, state: State, name, dataset, n_clusters, kernel, sigma, kernel_params, solver, passes, params, wait,
            labels_dataset) -> None:
    """Create spectral clustering NAME of --dataset into --clusters clusters and start it (labels:
    ``kpca show NAME --labels``)."""
    record = state.client.cluster(name, dataset, n_clusters, kernel_spec(kernel, sigma, kernel_params), solver,
                                  solver_params(params, passes), labels_dataset)
    if not wait:
        state.emit(record, f"{name}: {record['status']} ({solver}, {n_clusters} clusters of {dataset})")
        return
    if not state.json:
        click.echo(f"{name}: {record['status']} ({solver}, {n_clusters} clusters of {dataset})")
    _wait_clustering(ctx, state, name)


@click.command()
@click.argument("name")
@click.option("--no-wait", is_flag=True, help="return once the cancel is asked, before the fit has stopped")
@pass_state
def cancel(state: State, name: str, no_wait: bool) -> None:
    """Stop model (or clustering) NAME's fit after its current block, and wait until it has stopped; its
    last checkpoint is kept, and `kpca resume` continues from it."""
    kind = state.client.job_kind(name)
    record = state.client.cancel(name, kind)
    if no_wait:
        state.emit(record, f"{name}: cancel asked; it stops after the current block")
        return
    record = state.client.wait(name, kind=kind)
    progress = record.get("progress") or {}
    state.emit(record, f"{name}: {record['status']} after pass {progress.get('pass', 0)} of "
               f"{progress.get('passes') or (record.get('params') or {}).get('passes', '?')}")


@click.command()
@click.argument("name")
@click.option("--passes", type=click.IntRange(min=1), default=None,
              help="the new TOTAL number of passes (not passes more); needed to continue a completed fit")
@click.option("--dataset-version", type=click.IntRange(min=1), default=None,
              help="continue on this newer version of the data set (rows appended since; models)")
@click.option("--wait", is_flag=True, help="follow the fit until it ends")
@pass_state
@click.pass_context
def resume(ctx, state: State, name: str, passes: int | None, dataset_version: int | None, wait: bool) -> None:
    """Continue model (or clustering) NAME's cancelled, failed or completed fit from its last checkpoint."""
    kind = state.client.job_kind(name)
    record = state.client.resume(name, passes, dataset_version, kind)
    total = (record.get("params") or {}).get("passes")
    done = int((record.get("progress") or {}).get("pass") or 0)
    state.emit(record, f"{name}: {record['status']}, resumed from pass {done} to {total} passes in all")
    if wait:
        if kind == "models":
            follow(ctx, state, name, after_pass=done)  # the new passes: the ones done are not replayed
        else:
            _wait_clustering(ctx, state, name)


COMMANDS = (fit, watch, cancel, resume, cluster)
