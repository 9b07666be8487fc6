"""``kpca show NAME``: one model, clustering or data set in full, its history as a table."""

from __future__ import annotations

import click

from client.api import ApiError
from client.cli_base import State, pass_state
from client.cli_data import kind_of

#: what `show` looks for when no --kind is given, in this order
SEARCH_ORDER = ("models", "clusterings", "datasets")


def _number(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(header: list[str], rows: list[list]) -> str:
    """Rows under a header, columns aligned (numbers to 4 significant digits)."""
    cells = [header] + [[_number(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells)


def _fields(pairs: list[tuple[str, object]]) -> str:
    shown = [(key, value) for key, value in pairs if value not in (None, "", [], {})]
    width = max(len(key) for key, _ in shown)
    return "\n".join(f"{key.ljust(width)}  {value}" for key, value in shown)


def _kernel(record: dict) -> str:
    """The kernel as the fit used it (``params_used.kernel``: a width ``"auto"`` resolved), else as asked."""
    kernel = (record.get("params_used") or {}).get("kernel") or record.get("kernel") or {}
    return ", ".join([kernel.get("type", "?")] + [f"{k}={_number(v)}" for k, v in kernel.items() if k != "type"])


def _precision(used: dict) -> str | None:
    """The precision the kernel tiles computed in, and why (``params_used.kernel_precision`` and its reason)."""
    precision, reason = used.get("kernel_precision"), used.get("kernel_precision_reason")
    return None if precision is None else (precision if not reason else f"{precision} ({reason})")


def _progress(record: dict) -> str | None:
    progress = record.get("progress")
    if not progress:
        return None
    left = f", about {progress['remaining_s']:.0f} s left" if record.get("status") in ("queued", "running") else ""
    return f"pass {progress.get('pass')} of {progress.get('passes')} in {progress.get('elapsed_s', 0):.1f} s{left}"


def _history(record: dict, clustering: bool) -> str:
    history = record.get("history") or []
    if not history:
        return "history: no pass yet"
    metric = history[-1].get("convergence", {}).get("metric", "convergence")
    header = ["pass", "elapsed_s", metric, "iterate", "eigenvalue 1"]
    if clustering:
        header += ["labels_change", "VI"]
    rows = []
    for entry in history:
        convergence = entry.get("convergence") or {}
        eigenvalues = entry.get("eigenvalues") or [None]
        row = [entry.get("pass"), entry.get("elapsed_s"), convergence.get("value"), convergence.get("iterate"),
               eigenvalues[0]]
        if clustering:
            row += [entry.get("labels_change"), entry.get("variation_of_information")]
        rows.append(row)
    return "history (one line per pass):\n" + table(header, rows)


def describe_job(record: dict, kind: str) -> str:
    """A model's or clustering's record as text: what it is, where its fit stands, the values it used,
    its warnings, and its history."""
    clustering = kind == "clusterings"
    error = record.get("error") or {}
    used = record.get("params_used") or {}
    pairs = [(kind[:-1], record["name"]), ("status", record.get("status")),
             ("data set", f"{record.get('dataset')} version {record.get('dataset_version')}"),
             ("solver", record.get("solver")), ("kernel", _kernel(record)),
             ("clusters" if clustering else "components", record.get("n_clusters" if clustering else "n_components")),
             ("progress", _progress(record)),
             ("precision", _precision(used)),
             ("parameters used", ", ".join(f"{k}={_number(v)}" for k, v in used.items()
                                           if k not in ("kernel", "kernel_precision", "kernel_precision_reason"))),
             ("stopped early", "yes (params.tol met)" if record.get("stopped_early") else None),
             ("error", f"{error.get('code')}: {error.get('message')}" if error else None),
             ("labels", (record.get("labels_total") or record.get("n_rows")) if clustering else None),
             ("variation of information", record.get("variation_of_information") if clustering else None),
             ("created", record.get("created_at")), ("updated", record.get("updated_at"))]
    text = _fields(pairs)
    for warning in record.get("warnings") or []:
        text += f"\nwarning: {warning}"
    return text + "\n" + _history(record, clustering)


def describe_dataset(meta: dict) -> str:
    """A data set's metadata as text, its versions as a table."""
    pairs = [("data set", meta["name"]), ("status", meta.get("status")),
             ("rows", f"{meta.get('n_rows')} x {meta.get('n_features')} features ({meta.get('dtype')})"),
             ("version", meta.get("version")), ("checksum", meta.get("checksum")),
             ("staged chunks", meta.get("staged")), ("corrupt chunks", meta.get("corrupt_chunks")),
             ("created", meta.get("created_at"))]
    versions = [[v.get("version"), v.get("n_rows"), v.get("n_chunks"), v.get("committed_at")]
                for v in meta.get("versions") or []]
    text = _fields(pairs)
    if versions:
        text += "\nversions:\n" + table(["version", "rows", "chunks", "committed"], versions)
    return text


def find(state: State, name: str, kind: str | None) -> tuple[str, dict]:
    """``(kind, record)`` of ``name``: of ``kind``, else the first of `SEARCH_ORDER` that has it (the
    404 of the first kind searched if none does)."""
    kinds = [kind] if kind else list(SEARCH_ORDER)
    readers = {"models": state.client.model, "clusterings": state.client.clustering, "datasets": state.client.dataset}
    first: ApiError | None = None
    for each in kinds:
        try:
            return each, readers[each](name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            first = first or exc
    assert first is not None, "kinds names at least one kind"
    raise first


@click.command()
@click.argument("name")
@click.option("--kind", default=None, metavar="[datasets|models|clusterings]",
              help="what NAME is (default: the first of model, clustering, data set with that name)")
@click.option("--labels", is_flag=True, help="(clusterings) print the labels too, one a line")
@pass_state
def show(state: State, name: str, kind: str | None, labels: bool) -> None:
    """Everything about model, clustering or data set NAME: status, parameters used, warnings, and its
    history as a table (one line per pass)."""
    kind, record = find(state, name, kind_of(kind) if kind else None)
    if labels and kind == "clusterings":
        record = state.client.clustering(name, labels_limit=100_000)
    text = describe_dataset(record) if kind == "datasets" else describe_job(record, kind)
    if labels and record.get("labels") is not None:
        text += "\nlabels:\n" + "\n".join(str(label) for label in record["labels"])
    state.emit({"kind": kind, **record}, text)


COMMANDS = (show,)
