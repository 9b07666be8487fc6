"""Pictures through HTTP: ``convergence.png``, ``components.png`` and ``denoise-image?compare=true``
(real server, real cluster, 200 digits rows, 3 components).

Each picture is decoded with Pillow and checked for its size and for what it shows: the convergence
picture's plots change with the history, the component tiles are the worker's component arrays drawn,
the compare picture holds the input and the plain denoise-image answer pixel for pixel. The PNGs are
also written under the system's temporary folder (``kpca-pictures``) for a person to look at.
"""

from __future__ import annotations

import ast
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from service import plots
from store import ModelRegistry
from store.jobs.records import ModelRecord
from tests.api_checks import assert_error, upload_rows, wait_for_fit
from workers.serve import component_images

SERVER_SETTINGS = {"watchdog_s": 3600.0}  # stored records stay as written (no resubmission)
N_ROWS = 200
KERNEL = {"type": "gaussian", "sigma": 3.0}
SAVED = Path(tempfile.gettempdir()) / "kpca-pictures"


def decoded(response, name: str | None = None) -> np.ndarray:
    """RGB pixels (H, W, 3) of a PNG response; saved as ``name`` under `SAVED` when named."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    if name is not None:
        SAVED.mkdir(exist_ok=True)
        (SAVED / name).write_bytes(response.content)
    with Image.open(io.BytesIO(response.content)) as img:
        assert img.format == "PNG"
        return np.asarray(img.convert("RGB"))


def png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def registry(data_dir) -> ModelRegistry:
    return ModelRegistry(data_dir)


@pytest.fixture(scope="module")
def models(api, digits) -> dict[str, str]:
    """Two completed KHA-SMD fits of 200 digits (3 components, random start), of 2 and of 3 passes."""
    upload_rows(api, "digits", digits[:N_ROWS])
    names = {}
    for passes in (2, 3):
        name = names[passes] = f"kha-{passes}"
        r = api.post("/v1/models", json={
            "name": name, "dataset": "digits", "kernel": KERNEL, "n_components": 3, "solver": "kha-smd",
            "params": {"passes": passes, "seed": 0, "init": "random"}})
        assert r.status_code == 202, r.text
    for name in names.values():
        assert wait_for_fit(api, name)["status"] == "completed"
    return names


def stored_record(registry, name: str, status: str, history: list) -> None:
    """A model record as a worker leaves it, with the given status and history (no fit runs)."""
    registry.create(ModelRecord.model_validate({
        "name": name, "dataset": "digits", "kernel": KERNEL, "n_components": 2, "solver": "kha",
        "params": {"passes": 5, "seed": 0}, "status": status, "history": history}))


def eigenvalue_panel(pixels: np.ndarray) -> np.ndarray:
    """The lower half of a convergence picture (the eigenvalue panel; the title is at the top)."""
    return pixels[pixels.shape[0] // 2 :]


# ----------------------------------------------------------------- convergence.png


def test_convergence_png_has_the_asked_size_and_follows_the_history(api, models):
    three = decoded(api.get(f"/v1/models/{models[3]}/convergence.png"), "convergence.png")
    assert three.shape == (700, 900, 3)
    odd = decoded(api.get(f"/v1/models/{models[3]}/convergence.png", params={"width": 641, "height": 427}))
    assert odd.shape == (427, 641, 3)
    two = decoded(api.get(f"/v1/models/{models[2]}/convergence.png"))
    # a pass more draws other lines: the plots differ, not only the title
    assert not np.array_equal(eigenvalue_panel(two), eigenvalue_panel(three))
    assert not np.array_equal(three[60:350], two[60:350])
    # the same history draws the same picture
    assert np.array_equal(three, decoded(api.get(f"/v1/models/{models[3]}/convergence.png")))


def test_convergence_png_while_running_and_before_the_first_pass(api, models, registry):
    passes = [{"pass": p, "elapsed_s": 0.1 * p, "eigenvalues": [2.0 + 1 / p, 1.0 - 1 / (p + 1)],
               "convergence": {"metric": "eigenvalue_change", "value": None if p == 1 else 10.0 ** -p}}
              for p in (1, 2, 3)]
    stored_record(registry, "running-2", "running", passes[:2])
    stored_record(registry, "running-3", "running", passes)
    early = decoded(api.get("/v1/models/running-2/convergence.png", params={"width": 500, "height": 400}),
                    "convergence_running.png")
    later = decoded(api.get("/v1/models/running-3/convergence.png", params={"width": 500, "height": 400}))
    assert early.shape == later.shape == (400, 500, 3)
    assert not np.array_equal(eigenvalue_panel(early), eigenvalue_panel(later))

    stored_record(registry, "queued-0", "queued", [])
    message = assert_error(api.get("/v1/models/queued-0/convergence.png"), 409, "conflict", "name")["message"]
    assert "wait for its first pass" in message and "queued" in message
    stored_record(registry, "cancelled-0", "cancelled", [])
    message = assert_error(api.get("/v1/models/cancelled-0/convergence.png"), 409, "conflict", "name")["message"]
    assert "POST /v1/models/cancelled-0/resume" in message
    assert_error(api.get("/v1/models/absent/convergence.png"), 404, "not_found", "name")


@pytest.mark.parametrize("params, field", [({"width": 10}, "width"), ({"width": 5000}, "width"),
                                           ({"height": 299}, "height"), ({"height": "tall"}, "height")])
def test_convergence_png_size_out_of_bounds_is_422(api, models, params, field):
    assert_error(api.get(f"/v1/models/{models[3]}/convergence.png", params=params), 422, "invalid", field)


# ----------------------------------------------------------------- components.png


def test_components_png_draws_the_workers_component_images(api, models, data_dir):
    name = models[3]
    pixels = decoded(api.get(f"/v1/models/{name}/components.png"), "components.png")
    # default: all 3 components (fewer than 8), one 150-pixel tile each, a band for the title on top,
    # a colour bar under each
    assert pixels.shape[1:] == (3 * 150, 3) and 150 + plots.COLOUR_BAR_PX < pixels.shape[0] < 150 + 130
    components, eigenvalues = component_images(str(data_dir), name, 3)
    assert components.shape == (3, 64) and np.all(np.isfinite(components))
    assert np.all(np.diff(eigenvalues) <= 0)
    title = (f"model {name!r}: the first 3 components as 8x8 grey images, sum_i A_ki (x_i - mean); each on its "
             "own scale (the bar under it)")
    direct = plots.components_png(components, eigenvalues, (8, 8, 1), title)
    with Image.open(io.BytesIO(direct)) as img:
        assert np.array_equal(pixels, np.asarray(img.convert("RGB")))
    # every tile shows an image of its own: grey levels vary inside it, and tiles differ
    tiles = [pixels[-160:-40, k * 150 + 20 : k * 150 + 130] for k in range(3)]
    assert all(np.unique(t).size > 8 for t in tiles)
    assert not np.array_equal(tiles[0], tiles[1]) and not np.array_equal(tiles[1], tiles[2])

    two = decoded(api.get(f"/v1/models/{name}/components.png", params={"count": 2, "shape": "4x16"}),
                  "components_4x16.png")
    assert two.shape[1:] == (2 * 150, 3) and two.shape[0] < pixels.shape[0]  # wide tiles: a lower picture


def test_components_have_colour_bars_and_a_one_signed_component_shows_its_detail():
    """Issue 29: camera's first component (its brightness, one sign everywhere) was an all-black tile, and
    no tile said what its greys meant. Now a one-signed tile spans its own least to largest value, a
    component of both signs is symmetric about 0, and each tile has a colour bar."""
    ramp = 1.0 + 0.01 * np.arange(64.0)  # one sign, nearly constant: a brightness
    wave = np.sin(np.arange(64.0))  # both signs
    figure = plots.components_figure(np.stack([-ramp, wave]), np.array([2.0, 1.0]), (8, 8, 1), "t")
    images = [axes.images[0] for axes in figure.axes if axes.images]
    assert len(images) == 2 and len(figure.axes) == 4  # each image with its colour bar
    assert images[0].norm.vmin == pytest.approx(ramp.min()) and images[0].norm.vmax == pytest.approx(ramp.max())
    assert images[1].norm.vmin == pytest.approx(-np.abs(wave).max()) == -images[1].norm.vmax
    with Image.open(io.BytesIO(plots.components_png(np.stack([-ramp, wave]), np.array([2.0, 1.0]), (8, 8, 1), "t"))) \
            as img:
        pixels = np.asarray(img.convert("L"))
    first = pixels[-160:-40, 20:130]
    assert first.max() - first.min() > 150, "the brightness component is drawn as one grey"


def test_convergence_axes_are_logarithmic_and_labels_keep_formulas_whole():
    """Issue 29: the eigenvalue panel was linear (camera's first eigenvalue, 1214, flattened the other 19
    lines onto zero) and the y label broke its formula ("E /" then "E_min - 1")."""
    history = [{"pass": p, "convergence": {"metric": "excess_error", "value": 10.0 ** -p, "iterate": None},
                "eigenvalues": [1214.0, 80.0, 3.0, 0.5]} for p in (1, 2, 3)]
    for height in (300, 700, 3000):
        figure = plots.convergence_figure(history, "t", 900, height)
        top, bottom = figure.axes
        assert top.get_yscale() == "log" and bottom.get_yscale() == "log"
        assert "E / E_min - 1" in top.get_ylabel().splitlines(), top.get_ylabel()
    for metric, (words, formula) in plots.METRIC_WORDS.items():
        lines = plots.metric_label(metric, 12).splitlines()
        assert formula is None or formula in lines, (metric, lines)


def test_components_png_refuses_what_it_cannot_draw(api, models, registry):
    name = models[3]
    for params, field in [({"count": 4}, "count"), ({"count": 0}, "count"), ({"shape": "7x9"}, "shape"),
                          ({"shape": "8by8"}, "shape"), ({"shape": "0x64"}, "shape")]:
        assert_error(api.get(f"/v1/models/{name}/components.png", params=params), 422, "invalid", field)
    # rows that are not square images, and no shape given: the message says how to pass one
    upload_rows(api, "wide", np.arange(40.0).reshape(4, 10))
    registry.create(ModelRecord.model_validate({
        "name": "on-wide", "dataset": "wide", "kernel": KERNEL, "n_components": 2, "solver": "kha",
        "params": {"passes": 1}, "status": "completed"}))
    message = assert_error(api.get("/v1/models/on-wide/components.png"), 422, "invalid", "shape")["message"]
    assert "shape=HxW" in message and "10 values" in message
    stored_record(registry, "not-yet", "running", [])
    assert_error(api.get("/v1/models/not-yet/components.png"), 409, "conflict", "name")


# ----------------------------------------------------------------- denoise-image?compare=true


def test_compare_png_shows_the_input_and_the_plain_answer_side_by_side(api, models, digits, rng):
    clean = np.block([[digits[300].reshape(8, 8), digits[301].reshape(8, 8)],
                      [digits[302].reshape(8, 8), digits[303].reshape(8, 8)]])
    noisy = np.clip(clean + rng.normal(scale=0.2, size=clean.shape), 0, 1)
    image = np.rint(noisy * 255).astype(np.uint8)
    url = f"/v1/models/{models[3]}/denoise-image"
    headers = {"Content-Type": "image/png"}
    plain = api.post(url, params={"stride": 4}, content=png(image), headers=headers)
    assert plain.status_code == 200, plain.text
    with Image.open(io.BytesIO(plain.content)) as img:
        denoised = np.asarray(img)
    pixels = decoded(api.post(url, params={"stride": 4, "compare": "true"}, content=png(image), headers=headers),
                     "denoise_compare.png")
    factor = plots.display_factor(16, 16)
    side = 16 * factor
    assert plots.display_factor(128, 128) == 4  # issue 29: camera's 128 x 128 crop was shown 256 wide
    assert pixels.shape[1] > 2 * side and pixels.shape[0] > side
    # layout of `plots.compare_png`: 16-pixel margins, a band of title and labels on top
    assert pixels.shape[1] == 3 * 16 + 2 * side
    top = pixels.shape[0] - 16 - side
    left = pixels[top : top + side, 16 : 16 + side, 0]
    right = pixels[top : top + side, 32 + side : 32 + 2 * side, 0]
    assert np.array_equal(left, np.kron(image, np.ones((factor, factor), dtype=np.uint8)))
    assert np.array_equal(right, np.kron(denoised, np.ones((factor, factor), dtype=np.uint8)))
    assert not np.array_equal(left, right)
    # the same limits as the plain answer
    r = api.post(url, params={"stride": 9, "compare": "true"}, content=png(image), headers=headers)
    assert_error(r, 422, "invalid", "stride")



def test_no_module_of_the_service_imports_matplotlib_at_load():
    """Start-up does not pay for matplotlib: `service.plots` imports it inside its functions only, and
    no other module of service/, store/, workers/ or kpca/ imports it (read from the source)."""
    root = Path(__file__).resolve().parents[2]
    at_load = []
    packages = ("service", "store", "workers", "kpca")
    for path in sorted(p for package in packages for p in (root / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            at_load += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] == "matplotlib"]
    assert at_load == []
    inside = ast.parse((root / "service" / "plots.py").read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("matplotlib") for n in ast.walk(inside))
