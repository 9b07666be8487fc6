"""Pictures of models as PNG bytes: convergence per pass, components as images, before/after denoising.

Pure functions from arrays and records to PNG bytes; no HTTP here. Drawing
uses matplotlib's object API (`matplotlib.figure.Figure` on the Agg canvas,
never pyplot, which keeps global state and is not thread-safe), imported
inside each function so that the service's start-up does not pay for it.
Every figure is drawn at `DPI` dots per inch, so a size in pixels is
``inches * DPI``. Cost: one matplotlib figure drawn and saved as PNG plus, for
the images, O(pixels).
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np

from kpca.images.patches import patch_side

DPI = 100
#: words for the convergence metrics of `store.jobs.records.Convergence` (others: the name, underscores as spaces)
METRIC_WORDS = {
    "excess_error": ("excess reconstruction error", "E / E_min - 1"),
    "relative_error": ("relative reconstruction error", "E / ||K'||"),
    "eigenvalue_change": ("change of the eigenvalue estimates since the previous pass", None),
    "relative_reconstruction_error": ("relative reconstruction error", "sum ||x - g(f(x))||^2 / sum ||x||^2"),
}
LEGEND_COMPONENTS = 10  # more components than this: shaded lines instead of a legend
_SERIES_LABELS = {"value": "served components (what a projection gets)",
                  "iterate": "solver's raw iterate (before orthonormalisation)"}


def metric_label(metric: str, chars: int) -> str:
    """A convergence metric as an axis label of lines of about ``chars`` characters: its words wrapped,
    then its formula on a line of its own, never broken."""
    words, formula = METRIC_WORDS.get(metric, (metric.replace("_", " "), None))
    return _wrap(words, chars) + (f"\n{formula}" if formula else "")


def _figure(width_px: int, height_px: int):
    from matplotlib.figure import Figure

    return Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)


def _png(figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


MAX_DRAWN_POINTS = 20_000  # rows a clusters picture draws at most (a fixed-seed sample beyond)


def clusters_png(coordinates: np.ndarray, labels: np.ndarray, reference: np.ndarray | None, title: str,
                 width: int = 900, height: int = 420) -> bytes:
    """A clustering drawn: each row at its two spectral coordinates (`kpca.clustering.picture_coordinates`),
    coloured by its cluster; beside it, where reference labels are given, the same points coloured by those.
    At most `MAX_DRAWN_POINTS` rows (a fixed-seed sample). A PNG of ``width`` x ``height`` pixels.
    Cost O(rows drawn)."""
    rows = coordinates.shape[0]
    keep = np.arange(rows) if rows <= MAX_DRAWN_POINTS else np.sort(
        np.random.default_rng(0).choice(rows, MAX_DRAWN_POINTS, replace=False))
    xy, panels = np.asarray(coordinates)[keep], [("clusters found", np.asarray(labels)[keep])]
    if reference is not None:
        panels.append(("reference labels", np.asarray(reference)[keep]))
    figure = _figure(width, height)
    figure.suptitle(title, fontsize=10)
    for k, (name, values) in enumerate(panels):
        axes = figure.add_subplot(1, len(panels), k + 1)
        kinds = np.unique(values)
        colours = _colours(len(kinds))
        for j, kind in enumerate(kinds):
            chosen = values == kind
            axes.scatter(xy[chosen, 0], xy[chosen, 1], s=6, color=colours[j], label=_label_text(kind), linewidths=0)
        sample = "" if rows <= MAX_DRAWN_POINTS else f" ({len(keep):,} of {rows:,} rows)"
        axes.set_title(f"{name}: {len(kinds)}{sample}", fontsize=9)
        axes.set_xlabel("spectral coordinate 2", fontsize=8)
        axes.set_ylabel("spectral coordinate 3", fontsize=8)
        axes.tick_params(labelsize=7)
        if len(kinds) <= 20:
            axes.legend(fontsize=6, markerscale=2, loc="best", ncol=2 if len(kinds) > 10 else 1)
    figure.tight_layout()
    return _png(figure)


def _colours(count: int) -> list:
    """``count`` distinct colours: matplotlib's tab10 or tab20, else evenly spaced hues."""
    from matplotlib import colormaps

    if count <= 10:
        return [colormaps["tab10"](j) for j in range(count)]
    if count <= 20:
        return [colormaps["tab20"](j) for j in range(count)]
    return [colormaps["hsv"](j / count) for j in range(count)]


def _label_text(value) -> str:
    """A label as a legend shows it: a whole number without its ``.0``."""
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def convergence_png(history: list[dict], title: str, width: int = 900, height: int = 700) -> bytes:
    """`convergence_figure` as a PNG of ``width`` x ``height`` pixels."""
    return _png(convergence_figure(history, title, width, height))


def convergence_figure(history: list[dict], title: str, width: int = 900, height: int = 700):
    """Two panels over the passes of ``history``: the convergence figures (``convergence.value`` and
    ``convergence.iterate``) and the eigenvalue estimates (one line per component), both on a log scale
    (eigenvalues span orders of magnitude: on camera patches the first is 1000 times the 20th),
    non-positive and missing values left out.

    Parameters
    ----------
    history : list of dict
        Pass records as `store.jobs.records.PassRecord` dumps them: ``pass``,
        ``convergence`` ({metric, value, iterate}), ``eigenvalues``.
    title : str
        The figure's title (the model and its status).
    width, height : int
        Size of the PNG in pixels.

    Returns
    -------
    matplotlib.figure.Figure: ``width`` x ``height`` pixels, not yet drawn.
    """
    figure = _figure(width, height)
    figure.suptitle(_wrap(title, _chars(width - 20, 11)), fontsize=11)
    top, bottom = figure.subplots(2, 1, sharex=True)
    passes = [int(h["pass"]) for h in history]
    metrics = sorted({h["convergence"]["metric"] for h in history})
    drawn = 0
    for key, marker in (("value", "o"), ("iterate", "s")):
        points = [(p, h["convergence"].get(key)) for p, h in zip(passes, history)]
        points = [(p, v) for p, v in points if v is not None and math.isfinite(v) and v > 0]
        if points:
            x, y = zip(*points)
            top.plot(x, y, marker=marker, markersize=4, label=_SERIES_LABELS[key])
            drawn += 1
    if drawn:
        top.set_yscale("log")
        top.legend(fontsize=8, loc="best")
    else:
        top.text(0.5, 0.5, "no positive convergence figure yet", ha="center", va="center",
                 transform=top.transAxes, color="0.4")
    label_chars = _chars(0.33 * height, 8)
    top.set_ylabel("\n".join(metric_label(m, label_chars) for m in metrics), fontsize=8)
    top.set_title("convergence per pass (log scale; lower is better)", fontsize=9)
    top.grid(True, which="both", alpha=0.3)

    widest = max((len(h["eigenvalues"]) for h in history), default=0)
    many = widest > LEGEND_COMPONENTS  # then colours from dark (first) to light (last), no legend
    if many:
        from matplotlib import colormaps

        shades = colormaps["viridis"](np.linspace(0.0, 0.9, widest))
    positive = 0
    for k in range(widest):
        points = [(p, h["eigenvalues"][k]) for p, h in zip(passes, history) if k < len(h["eigenvalues"])]
        points = [(p, v) for p, v in points if v is not None and math.isfinite(v) and v > 0]
        if points:
            x, y = zip(*points)
            bottom.plot(x, y, marker=".", label=f"component {k + 1}", color=shades[k] if many else None)
            positive += 1
    if positive:
        bottom.set_yscale("log")
    if positive and not many:
        bottom.legend(fontsize=7, loc="best")
    shading = f"; component 1 dark to {widest} light" if many else ""
    bottom.set_title(f"eigenvalue estimates per pass (log scale{shading})", fontsize=9)
    bottom.set_ylabel("eigenvalue estimate", fontsize=8)
    bottom.set_xlabel("pass")
    bottom.grid(True, alpha=0.3)
    from matplotlib.ticker import MaxNLocator

    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(set(passes)) == 1:  # one pass: one tick, not a range of fractions around it
        bottom.set_xticks(passes)
    figure.tight_layout()
    return figure


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, max(8, width)))


def _chars(pixels: float, fontsize: float) -> int:
    """About how many characters of a ``fontsize`` point font fit in ``pixels`` (DejaVu Sans: a
    character is at most about 0.62 em wide on average text)."""
    return int(pixels / (0.62 * fontsize * DPI / 72))


def image_shape(n_features: int, shape: tuple[int, int] | None = None) -> tuple[int, int, int] | None:
    """``(H, W, C)`` of rows of ``n_features`` values seen as images: ``shape`` (H, W) given, C = 1
    when ``H W = n_features`` or 3 when ``3 H W = n_features``; else square patches, ``p x p`` grey or
    ``p x p x 3`` colour. None when neither fits."""
    if shape is not None:
        height, width = shape
        for channels in (1, 3):
            if height * width * channels == n_features:
                return height, width, channels
        return None
    for channels in (1, 3):
        with contextlib.suppress(ValueError):  # not square patches of these channels
            side = patch_side(n_features, channels)
            if side > 1:
                return side, side, channels
    return None


def tile_range(v: np.ndarray) -> tuple[float, float]:
    """The values a component's tile maps from black to white: ``(-m, m)``, ``m = max|v|``, for a
    component of both signs (0 mid-grey); ``(min v, max v)`` for one of a single sign, whose variation
    would otherwise be a few grey levels near black or white (camera's first component, its brightness)."""
    low, high = float(np.min(v)), float(np.max(v))
    if low < 0 < high or low == high:
        scale = max(abs(low), abs(high)) or 1.0
        return -scale, scale
    return low, high


def components_png(components: np.ndarray, eigenvalues: np.ndarray, shape: tuple[int, int, int], title: str,
                   tile: int = 150) -> bytes:
    """`components_figure` as a PNG."""
    return _png(components_figure(components, eigenvalues, shape, title, tile))


def components_figure(components: np.ndarray, eigenvalues: np.ndarray, shape: tuple[int, int, int], title: str,
                      tile: int = 150):
    """The rows of ``components`` (input-space images of the leading components) as a grid of tiles,
    at most 8 a row, each titled with its number and eigenvalue and with a colour bar under it.

    A component's sign is arbitrary: each is drawn with its sum >= 0. Each tile
    is scaled on its own (`tile_range`): a component of both signs symmetric
    about 0 (mid-grey), one of a single sign from its least to its largest
    value; the colour bar gives the values. Colour tiles map ``0.5 + v / (2
    max|v|)`` per channel, the bar's text says ``max|v|``.

    Parameters
    ----------
    components : ndarray of shape (k, H W C)
    eigenvalues : ndarray of shape (k,)
    shape : (H, W, C)
    title : str
    tile : int
        Width of a tile of a square image in pixels (the image drawn inside it, nearest-neighbour;
        other shapes keep their aspect within it).

    Returns
    -------
    matplotlib.figure.Figure: ``min(k, 8) * tile`` pixels wide for square images (at least 200),
    ``ceil(k / 8)`` rows of tiles high below a band for the title (wrapped to the width).
    """
    components = np.asarray(components, dtype=np.float64)
    height, width, channels = shape
    count = components.shape[0]
    columns = min(count, 8)
    rows = -(-count // columns)
    img_w = max(60, round((tile - 10) * width / max(height, width)))  # the image box, aspect kept
    img_h = int(np.clip(round(img_w * height / width), 16, 4 * tile))
    bar_h = COLOUR_BAR_PX
    cell_w, cell_h = img_w + 10, img_h + 24 + bar_h  # a tile's title above its image, its colour bar below
    fig_w = max(columns * cell_w, 200)
    lines = _wrap(title, _chars(fig_w - 12, 10))
    band = 10 + 15 * (lines.count("\n") + 1)
    fig_h = band + rows * cell_h + 4
    figure = _figure(fig_w, fig_h)
    figure.text(0.5, 1 - 5 / fig_h, lines, ha="center", va="top", fontsize=10)
    x0 = (fig_w - columns * cell_w) / 2
    for k in range(count):
        row, column = divmod(k, columns)
        left = (x0 + column * cell_w + 5) / fig_w
        bottom = fig_h - band - (row + 1) * cell_h + bar_h
        axes = figure.add_axes((left, bottom / fig_h, img_w / fig_w, img_h / fig_h))
        bar = figure.add_axes((left, (bottom - bar_h + 18) / fig_h, img_w / fig_w, 6 / fig_h))
        v = components[k] if components[k].sum() >= 0 else -components[k]
        if channels == 1:
            low, high = tile_range(v)
            image = axes.imshow(v.reshape(height, width), cmap="gray", vmin=low, vmax=high,
                                interpolation="nearest", aspect="auto")
            colour_bar = figure.colorbar(image, cax=bar, orientation="horizontal")
            ticks = [low, high] if low >= 0 or high <= 0 else [low, 0.0, high]
            colour_bar.set_ticks(ticks)
            labels = colour_bar.ax.set_xticklabels(["0" if t == 0 else f"{t:.2g}" for t in ticks])
            labels[0].set_horizontalalignment("left")  # the end values stay under their own tile
            labels[-1].set_horizontalalignment("right")
            colour_bar.ax.tick_params(labelsize=6, length=2, pad=1)
        else:
            scale = float(np.max(np.abs(v))) or 1.0
            axes.imshow(np.clip(0.5 + v.reshape(height, width, channels) / (2 * scale), 0, 1),
                        interpolation="nearest", aspect="auto")
            bar.set_axis_off()
            bar.text(0.5, 0.5, f"grey 0, channels to ±{scale:.2g}", ha="center", va="center", fontsize=6,
                     transform=bar.transAxes)
        value = eigenvalues[k] if k < len(eigenvalues) else float("nan")
        axes.set_title(f"PC {k + 1}" + (f"  λ={value:.3g}" if math.isfinite(value) else ""), fontsize=8)
        axes.set_xticks([])
        axes.set_yticks([])
    return figure


#: pixels under each component tile for its colour bar and the bar's values
COLOUR_BAR_PX = 28


def _display_rgb(image: np.ndarray) -> np.ndarray:
    """uint8 RGB (H, W, 3) of a decoded image (uint8 or uint16, grey or colour), values kept for uint8."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        image = np.rint(image.astype(np.float64) * (255.0 / np.iinfo(image.dtype).max)).astype(np.uint8)
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    return np.ascontiguousarray(image[:, :, :3])


def display_factor(height: int, width: int, target: int = 512, most: int = 16) -> int:
    """Integer pixel-replication factor that brings the shorter side of a small image to about
    ``target`` pixels (1 for an image that is already that large; at most ``most``)."""
    return int(max(1, min(most, target // max(1, min(height, width)))))


def compare_png(before: np.ndarray, after: np.ndarray, labels: tuple[str, str], title: str,
                margin: int = 16) -> tuple[bytes, dict]:
    """``before`` and ``after`` side by side, each labelled, placed pixel for pixel (no resampling but
    integer pixel replication by `display_factor`, the same for both, so small images are visible).

    Both are decoded images (uint8 or uint16, grey or colour); ``before`` may
    be smaller by an integer factor (the input of a hyperresolution), and is
    then pixel-replicated to ``after``'s size first. uint16 is shown on 8 bits. Returns the PNG and its
    layout: ``{"factor", "band", "margin", "left": (x, y), "right": (x, y)}``
    with the top-left pixel of each placed image (from the PNG's top left).
    """
    left, right = _display_rgb(before), _display_rgb(after)
    grow = right.shape[0] // max(1, left.shape[0])
    if grow > 1:
        left = np.repeat(np.repeat(left, grow, axis=0), grow, axis=1)
    if left.shape != right.shape:
        raise ValueError(f"after: shape {right.shape} differs from before's {left.shape}")
    factor = display_factor(*left.shape[:2])
    left = np.repeat(np.repeat(left, factor, axis=0), factor, axis=1)
    right = np.repeat(np.repeat(right, factor, axis=0), factor, axis=1)
    height, width = left.shape[:2]
    total_w = 3 * margin + 2 * width
    heading = _wrap(title, _chars(total_w - 2 * margin, 11))
    band = 40 + 17 * (heading.count("\n") + 1)  # the title's lines, then the labels
    total_h = band + height + margin
    figure = _figure(total_w, total_h)
    figure.patch.set_facecolor("white")
    # figimage places pixels unresampled; its origin is the bottom left
    figure.figimage(left, xo=margin, yo=margin, origin="upper")
    figure.figimage(right, xo=2 * margin + width, yo=margin, origin="upper")
    label_y = (margin + height + 4) / total_h
    for x0, label in ((margin, labels[0]), (2 * margin + width, labels[1])):
        figure.text((x0 + width / 2) / total_w, label_y, _wrap(label, _chars(width, 10)), ha="center", va="bottom",
                    fontsize=10, weight="bold")
    figure.text(0.5, 1 - 6 / total_h, heading, ha="center", va="top", fontsize=11)
    layout = {"factor": factor, "band": band, "margin": margin, "left": (margin, band),
              "right": (2 * margin + width, band)}
    return _png(figure), layout
