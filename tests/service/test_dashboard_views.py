"""The clusterings view, the comparison of several fits, and the API reference page, in headless Chromium
against a real server and LocalCluster (issue 29's dashboard).

Defends against: clusterings reachable only through curl, a comparison chart that draws one fit, an API
reference that shows raw ``backticks`` and has no way back to the dashboard.
"""

from __future__ import annotations

import numpy as np

from tests.api_checks import upload_rows, wait_for_fit
from tests.service.dashboard_pages import Dashboard


def test_a_clustering_from_the_form_its_page_labels_and_delete(api, server, browser, artefacts, rng, tmp_path):
    centres = np.array([[0.0, 0.0], [6.0, 6.0], [0.0, 6.0]])
    truth = np.repeat(np.arange(3), 40)
    upload_rows(api, "blobs", centres[truth] + rng.normal(scale=0.3, size=(120, 2)))
    upload_rows(api, "blobs-truth", truth.reshape(-1, 1).astype(float))
    board = Dashboard(browser, server, artefacts)
    page = board.page
    try:
        board.open("clusterings")
        page.wait_for_selector("#cluster-form select[name=labels_dataset] option[value=blobs-truth]", state="attached")
        assert "exact" in page.eval_on_selector_all("#cluster-form select[name=solver] option", "os => os.map(o => o.value)")
        page.fill("#cluster-form input[name=name]", "three")
        page.select_option("#cluster-form select[name=dataset]", "blobs")
        page.fill("#cluster-form input[name=n_clusters]", "3")
        page.fill("#cluster-form input[name=sigma]", "1")
        page.select_option("#cluster-form select[name=solver]", "kha-smd")
        page.fill("#cluster-form input[name=passes]", "4")
        page.select_option("#cluster-form select[name=labels_dataset]", "blobs-truth")
        page.click("#cluster-form button[type=submit]")
        board.until("location.hash === '#/clusterings/three'")
        board.until_text("clustering-notice", "completed: 120 labels in 3 clusters")
        record = wait_for_fit(api, "three", route="/v1/clusterings")
        assert record["status"] == "completed" and record["variation_of_information"] == 0.0, record
        assert "variation of information 0 against blobs-truth" in board.text("#clustering-notice")
        assert page.locator("#clustering-body tbody tr").count() == len(record["history"])
        board.until_text("clustering-body", "cluster sizes: 0: 40, 1: 40, 2: 40")
        page.wait_for_selector("#clusterings tbody tr[data-name=three] .status.completed")
        # nothing reads as a failure (issue 58, item 3): the kernel in words, the figure named, passes explained
        body = board.text("#clustering-body")
        assert "kernel gaussian, sigma 1" in body and "{" not in body, body
        assert "excess error" in body and "top eigenvalue" in body and "e-16" not in body, body  # 0 (rounding)
        done = record["progress"]["pass"]
        assert page.is_disabled("#clustering-resume")  # completed: Resume waits for a total above the passes done
        page.fill("#clustering-passes", str(done))
        assert page.is_disabled("#clustering-resume")
        page.fill("#clustering-passes", str(done + 2))
        assert page.is_enabled("#clustering-resume")
        page.fill("#clustering-passes", "")
        # the clusters drawn (issue 58): the picture loaded, through the API like every call (a key, if any)
        board.until("(() => { const i = document.getElementById('clustering-picture'); "
                    "return i && i.complete && i.naturalWidth > 400; })()")
        board.shot("20-clustering", docs="clustering", element="#clustering-details")

        # export: the labels as CSV, one a line in row order
        with page.expect_download() as download:
            page.click("#clusterings tbody tr[data-name=three] .labels-button")
        saved = tmp_path / "labels.csv"
        download.value.save_as(saved)
        lines = saved.read_text().split()
        assert download.value.suggested_filename == "three-labels.csv" and lines[0] == "label"
        exported = np.array(lines[1:], dtype=int)
        assert len(exported) == 120 and [len(set(exported[truth == k])) for k in range(3)] == [1, 1, 1], exported

        page.click("#clusterings tbody tr[data-name=three] button.danger")
        page.click("#clusterings tbody tr[data-name=three] button.danger")
        page.wait_for_selector("#clusterings tbody tr[data-name=three]", state="detached")
        assert api.get("/v1/clusterings/three").status_code == 404 and page.is_hidden("#clustering-details")
        assert not board.problems, (board.problems, board.refused)
    finally:
        board.close()


def test_several_fits_on_one_chart(api, server, browser, artefacts, digits):
    upload_rows(api, "digits", digits[:300])
    for name, solver, init in (("smd", "kha-smd", "random"), ("et", "kha-et", "random"), ("warm", "kha-smd", "subset")):
        api.post("/v1/models", json={"name": name, "dataset": "digits", "n_components": 4, "solver": solver,
                                     "kernel": {"type": "gaussian", "sigma": 3.0},
                                     "params": {"passes": 5, "init": init, "seed": 0, "update": "stochastic"}}
                 ).raise_for_status()
    histories = {name: wait_for_fit(api, name)["history"] for name in ("smd", "et", "warm")}
    board = Dashboard(browser, server, artefacts)
    page = board.page
    try:
        board.open("compare")
        page.wait_for_selector("#compare-choices input[value=warm]")
        for name in ("smd", "et", "warm"):
            page.check(f"#compare-choices input[value={name}]")
        board.until("document.getElementById('compare-chart').dataset.series === '3'")
        rows = page.locator("#compare-table tbody tr")
        board.until("document.querySelectorAll('#compare-table tbody tr').length === 3")
        for k, name in enumerate(("smd", "et", "warm")):
            cells = rows.nth(k).locator("td").all_text_contents()
            assert cells[0].strip() == name and cells[3] == "5", cells
            assert float(cells[4]) == float(f"{histories[name][-1]['convergence']['value']:.4g}"), (cells, name)
        # three colours of line on the canvas
        colours = page.evaluate("""() => { const c = document.getElementById('compare-chart');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; const seen = {blue: 0, red: 0, green: 0};
            for (let i = 0; i < d.length; i += 4) {
              if (d[i] < 60 && d[i + 1] < 130 && d[i + 2] > 150) seen.blue++;
              else if (d[i] > 150 && d[i + 1] < 80 && d[i + 2] < 80) seen.red++;
              else if (d[i] < 80 && d[i + 1] > 100 && d[i + 2] < 80) seen.green++; }
            return seen; }""")
        assert all(count > 30 for count in colours.values()), colours
        assert "figure: excess error" in board.text("#compare-metric")
        # every pass is drawn, a figure at or below 0 (rounding) on the bottom edge too (issue 58, item 4)
        assert page.get_attribute("#compare-chart", "data-points") == str(sum(len(h) for h in histories.values()))
        # one figure at a time; against seconds on a log scale
        page.select_option("#compare-figure", "residual")
        residuals = sum(1 for h in histories.values() for p in h if p["convergence"].get("residual") is not None)
        board.until(f"document.getElementById('compare-chart').dataset.points === '{residuals}'")
        assert "relative residual" in board.text("#compare-metric") and "last relative residual" in board.text(
            "#compare-table thead")
        page.select_option("#compare-x", "seconds")
        page.check("#compare-logx")
        board.until("document.getElementById('compare-chart').dataset.x === 'seconds log'")
        page.select_option("#compare-figure", "excess_error")
        page.select_option("#compare-x", "pass")
        page.uncheck("#compare-logx")
        board.until("document.getElementById('compare-chart').dataset.x === 'pass'")
        board.shot("30-compare", docs="compare")
        page.uncheck("#compare-choices input[value=et]")
        board.until("document.getElementById('compare-chart').dataset.series === '2'")
        assert not board.problems, (board.problems, board.refused)
    finally:
        board.close()


def test_the_api_reference_shows_code_and_leads_back(server, browser, artefacts):
    board = Dashboard(browser, server, artefacts)
    page = board.page
    try:
        page.goto(server + "/docs")
        page.wait_for_selector("details")
        texts = page.eval_on_selector_all(".prose", "nodes => nodes.map(n => n.textContent)")
        assert texts and not any("``" in text for text in texts), [t for t in texts if "``" in t][:3]
        assert page.locator(".prose code").count() > 20
        page.click("#dashboard-link")
        page.wait_for_selector("#tabs")
        assert page.url.rstrip("/") == server
        assert not board.problems, (board.problems, board.refused)
    finally:
        board.close()


def test_a_fit_that_needed_no_pass_does_not_read_as_pass_0_of_20(api, server, browser, artefacts, digits):
    """A default (ritz) fit of 150 rows is exact at its warm start: completed at pass 0 of its 20. The lists
    say so in words (issue 58, item 4: "completed fits show pass 0/20")."""
    upload_rows(api, "small", digits[:150])
    api.post("/v1/models", json={"name": "at-start", "dataset": "small", "n_components": 4,
                                 "kernel": {"type": "gaussian", "sigma": 3.0}}).raise_for_status()
    record = wait_for_fit(api, "at-start")
    assert (record["status"], record["progress"]["pass"], record["progress"]["passes"]) == ("completed", 0, 20)
    board = Dashboard(browser, server, artefacts)
    try:
        board.open("models")
        board.page.wait_for_selector("#models tbody tr[data-name=at-start] .status.completed")
        cells = board.page.locator("#models tbody tr[data-name=at-start] td").all_text_contents()
        assert "0, exact start" in cells and "0/20" not in cells, cells
        assert not board.problems, (board.problems, board.refused)
    finally:
        board.close()
