"""The docs' headline figures are their results files' (issue 53: every figure traced to what a bench script
wrote at a recorded commit). Each test recomputes figures from a results file under bench/results/ and asserts
that the page prints them, as tests/test_docs_tables.py does for the solver tables: a rerun whose numbers move,
or an edit of a figure, fails here until the page says what the file says. Covered: the README walkthrough's
SNRs (bench/readme_walkthrough.py), docs/denoising.md's "How well it works", and the measured figures of
docs/limits.md and docs/scaling.md that have a results file. No service is started."""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT))

CITED = [
    "readme_walkthrough.json", "denoise_quality.json", "bm3d_anchor.json", "hyperresolution.json",
    "body_memory.json", "answer_formats.json", "upload_cost.json", "event_streams.json", "event_streams_before.json",
    "load_issue52_calm.json", "load_issue52_abusive.json", "load_issue52_hostile.json", "load_one_process.json",
    "load.json", "load_repeat.json", "scale_out.json", "shard_cost.json", "shard_cost_stochastic.json",
    "shard_cost_100k.json", "shard_cost_20000.json", "shard_cost_cpu_16core.json", "shard_cost_gpu_16core.json",
    "shard_cost_100k_8workers_gpu_16core.json", "panel_threads.json", "service_fit.json", "service_fit_60000.json",
    "service_fit_60000_one_worker.json", "service_fit_sharded_20000.json", "service_fit_sharded_20000_no_guards.json",
    "service_fit_threshold_20000.json", "hostile_figures.json", "time_to_accuracy.json", "denoise_profile.json",
    "denoise_profile_before.json", "vs_sklearn.json", "estimator_memory.json", "object_store.json",
    "store_backends.json",
]


def results(name: str) -> dict:
    """The results document ``bench/results/<name>``."""
    return json.loads((RESULTS / name).read_text())


def page(path: str) -> str:
    """The text of a page, paragraphs' line breaks kept."""
    return (ROOT / path).read_text()


def flat(text: str) -> str:
    """``text`` with every run of white space one space: a sentence regardless of where its lines break."""
    return re.sub(r"\s+", " ", text)


def section(text: str, heading: str) -> str:
    """The part of ``text`` from the heading line ``heading`` to the next heading of the same or a higher level."""
    start = text.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    following = re.search(rf"^#{{1,{level}}} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + following.start()] if following else text[start:]


def said(text: str, pattern: str) -> tuple:
    """The groups of ``pattern`` in ``text`` with white space flattened; fails naming the pattern if absent."""
    found = re.search(pattern, flat(text))
    assert found, f"the sentence changed (update this test with it): {pattern}"
    return found.groups()


def missing_lines(text: str, lines: list[str]) -> list[str]:
    """The ``lines`` that do not stand, whole, as lines of ``text``."""
    present = set(text.splitlines())
    return [line for line in lines if line not in present]


def thousands(value: float, digits: int = 0) -> str:
    """``value`` with a comma every three digits, as the docs print counts and seconds."""
    return f"{value:,.{digits}f}"


# -- the README walkthrough ------------------------------------------------------------------------------


def test_the_walkthroughs_snrs_are_what_it_printed_when_run_as_written():
    """README.md's 'noisy X dB -> denoised Y dB SNR' equals what examples/noisy_camera.py printed when
    bench/readme_walkthrough.py ran the README's lines; and those lines are still the README's."""
    from bench.readme_walkthrough import walkthrough

    document = results("readme_walkthrough.json")
    readme = page("README.md")
    noisy, denoised = said(readme, r"# noisy ([\d.]+) dB -> denoised ([\d.]+) dB SNR")
    assert (noisy, denoised) == (f"{document['snr_db']['noisy']:.1f}", f"{document['snr_db']['denoised']:.1f}")
    first, second = walkthrough(readme)
    assert (document["first_terminal"], document["second_terminal"]) == (first, second), \
        "the README's walkthrough changed since it was measured: rerun bench/readme_walkthrough.py"
    assert all(step["returncode"] == 0 for step in document["steps"])


def test_the_walkthroughs_patch_count_is_what_the_upload_printed():
    """The walkthrough's comment '3600 patches, 121 values each' is what `kpca upload-image` answered."""
    document = results("readme_walkthrough.json")
    patches, values = said(page("README.md"), r"# (\d+) patches, (\d+) values each")
    upload = next(step for step in document["steps"] if "upload-image" in step["command"])
    assert f"{patches} patches of 11x11 ({values} values each)" in upload["stdout"]


# -- docs/denoising.md, "How well it works" ------------------------------------------------------------------

METHOD_COLUMNS = ("noisy", "linear_pca", "service", "tuned/fixed-point", "tuned/kwok-tsang", "tuned/gradient",
                  "tuned/learned", "nl_means", "tv_chambolle")


def how_well() -> str:
    """docs/denoising.md's "How well it works" section."""
    return section(page("docs/denoising.md"), "## How well it works")


def chosen(case: dict) -> str:
    """The table's "chosen" cell of a case: first stage, rank and second stage."""
    choice = case["rows"]["service"]["chosen"]
    stage = choice.get("second_stage")
    return f"{choice['method']}, r = {choice['n_components']}" + (f" + {stage}" if stage else "")


def to_the_goal(gain: float) -> str:
    """The table's last cell: 'met', or how far below +0.5 dB over linear PCA."""
    return "met" if gain >= 0.5 else f"{0.5 - gain:.2f} dB short"


def quality_rows(document: dict) -> list[str]:
    """denoise_quality.json's table as docs/denoising.md prints it, one line per case and the mean."""
    rows = []
    for case in document["cases"]:
        psnr = " | ".join(f"{case['rows'][key]['psnr_db']:.2f}" for key in METHOD_COLUMNS)
        rows.append(f"| {case['image']} | {case['size']} | {case['noise']:g} | {psnr} | "
                    f"{case['service_minus_linear_db']:+.2f} | {case['service_minus_nl_means_db']:+.2f} | "
                    f"{chosen(case)} | {to_the_goal(case['service_minus_linear_db'])} |")
    means = document["mean_psnr_db"]
    rows.append("| **mean** | | | " + " | ".join(f"{means[key]:.2f}" for key in METHOD_COLUMNS) +
                f" | {means['service'] - means['linear_pca']:+.2f} | "
                f"{document['summary']['mean_service_minus_nl_means_db']:+.2f} | | |")
    return rows


def mean_ssim(document: dict, key: str) -> float:
    """The mean SSIM of one column over the cases."""
    return float(np.mean([case["rows"][key]["ssim"] for case in document["cases"]]))


def case_name(case: dict) -> str:
    """A case as the prose names it: 'gravel 256 at 0.2'."""
    return f"{case['image']} {case['size']} at {case['noise']:g}"


def signed(value: float) -> str:
    """A dB difference as the prose prints it: '+0.22', '−0.00' (a true minus sign)."""
    return f"{value:+.2f}".replace("-", "−")


def test_the_denoising_table_is_denoise_quality():
    rows = quality_rows(results("denoise_quality.json"))
    assert not missing_lines(how_well(), rows), missing_lines(how_well(), rows)[:3]


def test_the_denoising_ssim_line_is_denoise_quality():
    document = results("denoise_quality.json")
    expected = ", ".join(f"{key.replace('_', ' ')} {mean_ssim(document, key):.3f}"
                         for key in ("noisy", "linear_pca", "service", "nl_means", "tv_chambolle"))
    assert f"Mean SSIM: {expected}." in how_well()


def test_the_denoising_goals_are_denoise_quality():
    """'34 of 36 cases ...; short are ... (+0.22 dB) and ... (−0.00 dB)', '+1.29 dB above it', '+1.68 dB above
    linear PCA on average', 'SSIM 0.856'."""
    document = results("denoise_quality.json")
    cases, summary, means = document["cases"], document["summary"], document["mean_psnr_db"]
    text = flat(how_well())
    count, total = said(text, r"\*\*not met\*\*, (\d+) of (\d+) cases")
    assert (int(count), int(total)) == (summary["cases_service_at_least_0.5_db_above_linear"], len(cases))
    short = [c for c in cases if c["service_minus_linear_db"] < 0.5]
    listed = " and ".join(f"{case_name(c)} ({signed(c['service_minus_linear_db'])} dB)" for c in short)
    assert f"short are {listed}" in text
    assert f"met, the service {signed(summary['mean_service_minus_nl_means_db'])} dB above it" in text
    assert (f"the service is {signed(means['service'] - means['linear_pca'])} dB above linear PCA on average"
            in text)
    assert said(text, r"on average \(before [^)]*\), SSIM ([\d.]+)")[0] == f"{mean_ssim(document, 'service'):.3f}"


def test_the_bm3d_comparison_is_bm3d_anchor():
    """The BM3D paragraph's figures: its gain over linear PCA, its cases at the goal, where it is short, the
    true-noise count, gravel's figure, the cases at or above it, the mean gap, the largest gap, its seconds."""
    anchor = results("bm3d_anchor.json")
    cases = anchor["cases"]
    text = flat(how_well())
    assert said(text, r"noise estimate: ([+−][\d.]+) dB over linear PCA on average \(the service ([+−][\d.]+) dB\)") \
        == (signed(anchor["bm3d_over_linear"]["mean_db"]), signed(anchor["service_over_linear"]["mean_db"]))
    assert said(text, r"(\d+) of 36 cases 0\.5 dB above linear PCA \(the service (\d+)\)") == \
        (str(anchor["bm3d_over_linear"]["cases_at_goal"]), str(anchor["service_over_linear"]["cases_at_goal"]))
    true_noise = sum(c["bm3d_true_noise_db"] - c["linear_pca_db"] >= anchor["goal_db"] for c in cases)
    assert f"given the true noise level instead, {true_noise} cases" in text
    gravel = next(c for c in cases if (c["image"], c["size"], c["noise"]) == ("gravel", 256, 0.2))
    assert f"BM3D reaches {signed(gravel['bm3d_minus_linear_db'])} dB" in text
    at_or_above, below = said(text, r"at or above BM3D in (\d+) of 36 \(.*?\), and ([\d.]+) dB below it on average")
    assert (int(at_or_above), below) == (anchor["service_at_or_above_bm3d"], f"{-anchor['service_minus_bm3d_mean_db']:.2f}")
    largest = min(cases, key=lambda c: c["service_minus_bm3d_db"])
    assert (f"{signed(largest['service_minus_bm3d_db'])} dB, the largest {largest['image']} {largest['size']} at "
            f"{largest['noise']:g}") in text
    seconds = [float(np.mean([c["bm3d_seconds"] for c in cases if c["size"] == size])) for size in (128, 256)]
    assert f"BM3D took {seconds[0]:.1f} s at 128 x 128 and {seconds[1]:.1f} s at 256 x 256" in text
    service = [float(np.mean([c["service_seconds"] for c in cases if c["size"] == size])) for size in (128, 256)]
    ratio = anchor["time_ratio"]
    assert (f"the service's defaults {service[0]:.1f} s and {service[1]:.1f} s: {ratio['128']:.1f} and "
            f"{ratio['256']:.1f} times BM3D's time") in text  # issue 55: measured in the same run


def test_what_the_tuning_chose_is_denoise_quality():
    document = results("denoise_quality.json")
    choices = [case["rows"]["service"]["chosen"] for case in document["cases"]]
    methods = ("linear", "fixed-point", "kwok-tsang", "learned")
    first = ", ".join(f"{m} {sum(c['method'] == m for c in choices)}" for m in methods)
    stages = [c.get("second_stage") for c in choices]
    text = flat(how_well())
    assert f"What the tuning chose: {first} as the first stage" in text
    assert f"a Wiener second stage in {sum(s is not None for s in stages)} of {len(stages)} cases" in text
    assert f'the single stage ("wiener") in {stages.count("wiener")}' in text
    assert f"the variants of `kpca.images.second_stage` in {sum(s not in (None, 'wiener') for s in stages)}" in text


def test_the_denoising_times_are_denoise_quality():
    """'Mean over cases: 128 x 128: service 45 s (tuning 24-154 s), linear PCA 0.2 s, ...' and the process time."""
    document = results("denoise_quality.json")
    text = flat(how_well())
    assert f"{document['seconds'] / 60:.0f} min of process time" in text
    for size, digits in ((128, (1, 2, 1)), (256, (1, 2, 1))):
        cases = [c for c in document["cases"] if c["size"] == size]
        mean = {key: float(np.mean([c["rows"][key]["seconds"] for c in cases]))
                for key in ("service", "linear_pca", "nl_means", "tv_chambolle")}
        tuning = [next(s["seconds"] for s in c["rows"]["service"]["steps"] if s["step"] == "tuning") for c in cases]
        got = said(text, rf"{size} x {size}: service (\d+) s \(tuning (\d+)-(\d+) s\), linear PCA ([\d.]+) s, "
                         rf"non-local means ([\d.]+) s, TV ([\d.]+) s")
        assert got == (f"{mean['service']:.0f}", f"{min(tuning):.0f}", f"{max(tuning):.0f}",
                       f"{mean['linear_pca']:.{digits[0]}f}", f"{mean['nl_means']:.{digits[1]}f}",
                       f"{mean['tv_chambolle']:.{digits[2]}f}")


def hyperresolution_rows(document: dict) -> list[str]:
    """hyperresolution.json's table as docs/denoising.md prints it."""
    x2, x4 = document["results"]["x2"]["table"], document["results"]["x4"]["table"]
    rows = []
    for method in x2:
        exact = max(x2[method]["max_block_mean_error"], x4[method]["max_block_mean_error"]) < 1e-9
        rows.append(f"| {method} | {x2[method]['mse_over_bicubic']:.3f} | {x2[method]['ssim']:.3f} | "
                    f"{x4[method]['mse_over_bicubic']:.3f} | {x4[method]['ssim']:.3f} | {'yes' if exact else 'no'} |")
    return rows


def test_the_hyperresolution_table_and_goal_are_hyperresolution():
    document = results("hyperresolution.json")
    assert not missing_lines(how_well(), hyperresolution_rows(document))
    x2, x4 = document["results"]["x2"], document["results"]["x4"]
    ratio = {m: x2["table"][m]["mse_over_bicubic"] for m in x2["table"]}
    text = flat(how_well())
    assert said(text, r"met, ([\d.]+) x bicubic's MSE") == (f"{ratio['kernel+constraint']:.3f}",)
    assert said(text, r"bicubic with the same projection is (\d\.\d+), linear PCA with it (\d\.\d+)") == \
        (f"{ratio['bicubic+constraint']:.3f}", f"{ratio['linear_pca+constraint']:.3f}")
    for scale, part in (("x2", x2), ("x4", x4)):
        assert f"{scale} {part['chosen']['method']} (r = {part['chosen']['n_components']})" in text
    x4_ratio = {m: x4["table"][m]["mse_over_bicubic"] for m in x4["table"] if m not in ("bicubic", "replication")}
    loose = max(abs(v - 1) for m, v in x4_ratio.items() if "constraint" not in m)
    tight = max(abs(v - 1) for m, v in x4_ratio.items() if "constraint" in m)
    within = said(text, r"At x4 every method's MSE is within (\d+) % of bicubic's unconstrained \(the kernel path "
                        r"([\d.]+)\) and (\d+) % constrained")
    assert int(within[0]) >= 100 * loose and int(within[2]) >= 100 * tight and within[1] == f"{x4_ratio['kernel']:.3f}"
    replication = sorted(document["results"][s]["table"]["replication"]["mse_over_bicubic"] for s in ("x2", "x4"))
    assert f"is {replication[0]:.2f} to {replication[1]:.2f} x bicubic's" in text


# -- docs/limits.md ---------------------------------------------------------------------------------------


def limits() -> str:
    """docs/limits.md, white space flattened."""
    return flat(page("docs/limits.md"))


def test_body_memory_is_body_memory():
    runs = {run["kind"]: run for run in results("body_memory.json")["runs"]}
    text = limits()
    csv, json_after, json_before = runs["csv"], runs["json-after"], runs["json-before"]
    assert f"one-column CSV {csv['peak_rss_growth_mib']:.0f} MiB for its {csv['result_mib']:.0f} MiB" in text
    assert f"JSON {json_after['peak_rss_growth_mib']:.0f} MiB for {json_after['result_mib']:.0f} MiB" in text
    assert f"({thousands(json_before['peak_rss_growth_mib'])} MiB with pydantic's objects)" in text
    assert f"{json_before['growth_over_body']:.0f} times the body on `bench/body_memory.py`'s pydantic path" in text
    assert runs["npy"]["peak_rss_growth_mib"] == 0 and "`.npy` nothing" in text


def test_answer_formats_are_answer_formats():
    document = results("answer_formats.json")
    median = {kind: document["seconds"][kind]["median_s"] for kind in ("json", "npy", "npy_both")}
    assert (f"JSON both ways {median['json']:.2f} s, JSON rows and a `.npy` answer {median['npy']:.2f} s "
            f"({document['npy_over_json_median']:.2f}x), `.npy` both ways {median['npy_both']:.2f} s "
            f"({document['npy_both_over_json_median']:.2f}x)") in limits()


def test_upload_cost_is_upload_cost():
    points = {p["staged_chunks"]: p for p in results("upload_cost.json")["points"]}
    got = said(limits(), r"([\d.]+) ms per upload with 10 chunks staged, ([\d.]+) ms with 100, ([\d.]+) ms with "
                         r"1,000 and ([\d.]+) ms with 5,000, against ([\d.]+)-([\d.]+) ms for numpy")
    numpy_ms = [p["numpy_write_ms"] for p in points.values()]
    assert got == (f"{points[10]['upload_ms']:.2f}", f"{points[100]['upload_ms']:.2f}",
                   f"{points[1000]['upload_ms']:.1f}", f"{points[5000]['upload_ms']:.1f}",
                   f"{min(numpy_ms):.1f}", f"{max(numpy_ms):.1f}")


def test_event_streams_are_event_streams():
    after = {run["streams"]: run for run in results("event_streams.json")["runs"]}
    before = {run["streams"]: run for run in results("event_streams_before.json")["runs"]}
    got = said(limits(), r"`/healthz` p50 (\d+) ms, p99 (\d+) ms \(before: ([\d,]+) ms and ([\d,]+) ms\), the fit "
                         r"(\d+) passes \(before: (\d+); (\d+) and (\d+) with no stream\), ([\d.]+) record reads")
    assert got == (f"{after[300]['healthz_p50_ms']:.0f}", f"{after[300]['healthz_p99_ms']:.0f}",
                   thousands(before[300]["healthz_p50_ms"]), thousands(before[300]["healthz_p99_ms"]),
                   str(after[300]["passes"]), str(before[300]["passes"]), str(after[0]["passes"]),
                   str(before[0]["passes"]), f"{after[300]['record_reads_per_s']:.1f}")


def load_row(label: str, name: str) -> str:
    """A row of docs/limits.md's hostile-client table from ``load_<name>.json``."""
    document = results(f"{name}.json")
    project, healthz = document["latency"]["project"], document["healthz"]
    return (f"| {label} (`{name}.json`) | {document['requests_per_s']:.1f} | {project['p50_ms']:.1f} / "
            f"{project['p99_ms']:.1f} ms | {healthz['p50_ms']:.1f} / {healthz['p99_ms']:.1f} / {healthz['max_ms']:.1f} ms |")


def test_the_hostile_client_table_is_its_load_runs():
    rows = [load_row("no abusive client", "load_issue52_calm"),
            load_row("4 abandoned `/denoise` at the work limit, as issue 30", "load_issue52_abusive"),
            load_row("those, 400 sockets sending headers a byte every 0.1 s and 2 chunked floods",
                     "load_issue52_hostile")]
    assert not missing_lines(page("docs/limits.md"), rows), missing_lines(page("docs/limits.md"), rows)
    hostile = results("load_issue52_hostile.json")
    text = limits()
    slow, floods = hostile["slow_sockets"], hostile["floods"]
    assert (f"closed {thousands(slow['closed_by_server'])} of the {thousands(slow['opened'])} slow sockets" in text
            and f"a median {slow['median_open_s']:.1f} s after they connected" in text)
    assert f"the floods' {thousands(floods['connections'])} connections" in text
    assert f"({floods['bytes_sent'] / 1e9:.1f} GB offered" in text
    runs = [results(f"{name}.json") for name in ("load_issue52_calm", "load_issue52_abusive", "load_issue52_hostile")]
    assert all(r["errors"] == 0 and r["clients"] == 32 and r["seconds"] == 60 for r in runs)


# -- docs/scaling.md --------------------------------------------------------------------------------------


def scaling() -> str:
    """docs/scaling.md, white space flattened."""
    return flat(page("docs/scaling.md"))


def test_api_processes_throughput_is_the_load_runs():
    one, two, again = (results(f"{n}.json")["requests_per_s"] for n in ("load_one_process", "load", "load_repeat"))
    text = scaling()
    assert f"served {one:.0f} requests/s with one process" in text
    assert f"of their own and the start's objects frozen, {min(two, again):.0f}-{max(two, again):.0f}" in text


def test_the_scale_out_table_is_scale_out():
    document = results("scale_out.json")
    end, comm = document["end_to_end"], document["communication"]
    fits, model = end["fits"], document["model"]
    rows = [f"| pass, 1 worker | {fits['1']['pass_s']:.1f} s |", f"| pass, 2 workers | {fits['2']['pass_s']:.1f} s |",
            f"| ratio t(2) / t(1) (goal <= 0.6) | **{end['ratio_pass']:.3f}** (the model says "
            f"{document['model_ratio_here']:.3f}) |",
            f"| wall from submission (centring, start, 2 passes), 1 and 2 workers | {fits['1']['wall_s']:.0f} s, "
            f"{fits['2']['wall_s']:.0f} s ({end['ratio_wall']:.3f}) |",
            f"| agreement of A, 2 workers vs 1 | {end['max_rel_diff_A']:.1e} relative |",
            f"| F, one worker's effective rate in `Shard.apply` | {model['flop_rate_F']:.2e} flop/s |".replace("e+", "e"),
            f"| coordinator per block, c1 (c2 fitted 0) | {model['c1_s_per_row']:.2e} s per row: "
            f"{model['c1_s_per_row'] * 1024 * 1e3:.0f} ms per block of 1024 |".replace("e-05", "e-5"),
            f"| alpha (round trip of a tiny call to both shards) | {model['alpha_s'] * 1e3:.1f} ms |",
            f"| effective alpha (a real block beyond compute and bytes, per round trip) | "
            f"{model['alpha_effective_s'] * 1e3:.1f} ms |",
            f"| beta (loopback) | {model['beta_bytes_per_s'] / 1e9:.2f} GB/s |",
            f"| bytes per block and shard, out / in | {comm['block']['bytes_out_per_shard'] / 1e3:.0f} kB / "
            f"{comm['block']['bytes_in_per_shard'] / 1e3:.0f} kB (out: the formula exactly) |"]
    assert model["c2_s_per_row2"] == 0
    assert not missing_lines(page("docs/scaling.md"), rows), missing_lines(page("docs/scaling.md"), rows)


def test_the_scale_out_prediction_is_scale_out():
    prediction = results("scale_out.json")["prediction"]
    labels = {"loopback_measured": "loopback, alpha 2.5 ms, beta 1.85 GB/s",
              "loopback_blocks": "loopback, effective alpha 20.5 ms", "assumed_10gbit_100us": "assumed 10 Gbit/s, 100 us"}
    rows = [f"| {label} | {thousands(p['pass_s'])} s | {thousands(p['shard_s'])} / {p['coord_s']:.0f} / "
            f"{p['comm_s']:.0f} s | {100 * p['comm_fraction']:.1f} % | {p['crossover_w']:.0f} | "
            f"{p['block_for_10pct_comm']} |" for key, label in labels.items() for p in [prediction[key]]]
    assert not missing_lines(page("docs/scaling.md"), rows), missing_lines(page("docs/scaling.md"), rows)


def figure_range(values, digits: int) -> str:
    """'a-b' of ``values`` at ``digits`` decimals, or one figure where both ends print the same."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low}-{high}"


def shard_cost_cells(document: dict) -> list[str]:
    """A shard-cost row's figures, as docs/scaling.md prints them: CPU s a pass on 1 / 2 workers over every
    pair and the kept fit, the CPU ratio with each pair's, wall s, the wall ratio, and the whole fit."""
    fits = [*document.get("pairs", []), document["fits"]]

    def both(key, digits):
        return " / ".join(figure_range([f[w][key] for f in fits], digits) for w in ("1", "2"))

    pairs = ", ".join(f"{r:.2f}" for r in document["cpu_ratios"])
    walls = ", ".join(f"{r:.2f}" for r in document["wall_ratios"])
    return [both("median_pass_cpu_s", 2), f"{document['cpu_ratio']:.2f} ({pairs})", both("median_pass_wall_s", 2),
            f"{document['wall_ratio']:.2f} ({walls})", both("fit_wall_s", 1)]


def table_row(text: str, start: str) -> list[str]:
    """The cells of the table line of ``text`` that begins with ``start``."""
    line = next(line for line in text.splitlines() if line.startswith(start))
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_the_default_shard_cost_row_is_shard_cost():
    cells = table_row(page("docs/scaling.md"), "| default, the shards iterating the guard vectors too")
    assert cells[1:] == shard_cost_cells(results("shard_cost.json"))


def test_the_stochastic_shard_cost_row_is_shard_cost_stochastic():
    document = results("shard_cost_stochastic.json")
    cells = table_row(page("docs/scaling.md"), "| the same with jitted tile panels (`shard_cost_stochastic.json`)")
    expected = shard_cost_cells(document)
    fits = [*document["pairs"], document["fits"]]
    cpu = " / ".join(figure_range([f[w]["fit_cpu_s"] for f in fits], 1) for w in ("1", "2"))
    assert cells[1:] == [expected[0], expected[1], expected[2], f"{document['wall_ratio']:.2f}", f"{cpu} CPU s"]


def test_the_100k_and_16_core_figures_are_their_shard_costs():
    text = scaling()
    big = results("shard_cost_100k.json")["fits"]
    cpu, wall = (big[w]["median_pass_cpu_s"] for w in "12"), (big[w]["median_pass_wall_s"] for w in "12")
    (cpu1, cpu2), (wall1, wall2) = cpu, wall
    fit1, fit2 = big["1"]["fit_wall_s"], big["2"]["fit_wall_s"]
    assert (f"a default pass costs {cpu2 / cpu1:.2f}x the CPU and {wall2 / wall1:.2f}x the wall time on two workers "
            f"({cpu2:.1f} against {cpu1:.1f} CPU seconds, {wall2:.1f} against {wall1:.1f} s), and the whole fit "
            f"{fit2 / fit1:.2f}x the wall time ({fit2:.1f} against {fit1:.1f} s)") in text
    cores = results("shard_cost_cpu_16core.json")["fits"]
    one, two = cores["1"], cores["2"]
    assert (f"one worker's fit kept only {one['median_pass_cpu_s'] / one['median_pass_wall_s']:.1f} cores busy "
            f"({one['median_pass_cpu_s']:.1f} CPU s in a {one['median_pass_wall_s']:.2f} s pass at l = 40,000)") in text
    assert (f"Two worker processes kept {two['median_pass_cpu_s'] / two['median_pass_wall_s']:.1f} busy: a pass took "
            f"{two['median_pass_wall_s'] / one['median_pass_wall_s']:.2f}x the wall time ({two['median_pass_wall_s']:.2f} s) "
            f"and {two['median_pass_cpu_s'] / one['median_pass_cpu_s']:.2f}x the CPU") in text
    gpu, gpu100k = results("shard_cost_gpu_16core.json")["fits"], results("shard_cost_100k_8workers_gpu_16core.json")["fits"]
    assert (f"{gpu['1']['median_pass_wall_s']:.2f} s a pass at 40,000 rows, {gpu100k['1']['median_pass_wall_s']:.2f} s "
            f"at 100,000, against {gpu['2']['median_pass_wall_s']:.2f} s and {gpu100k['8']['median_pass_wall_s']:.1f} s "
            f"sharded over 2 and 8 workers") in text


def test_panel_threads_are_panel_threads():
    passes = results("panel_threads.json")["pass"]
    beside = (passes["jitted panel, 2 threads, beside a busy thread"]["wall_s"],
              passes["numpy panel, 2 threads, beside a busy thread"]["wall_s"])
    alone = (passes["jitted panel, 2 threads"]["wall_s"], passes["numpy panel, 2 threads"]["wall_s"])
    assert (f"took {beside[0]:.1f} s against {beside[1]:.1f} s before ({min(alone):.2f}-{max(alone):.2f} s alone"
            in scaling())


def service_fit_cells(name: str, label: str) -> tuple[list[str], list[str]]:
    """The service-fit table's row that starts with ``label`` and the cells ``<name>.json`` gives it: the
    service's seconds, its passes, the in-process fit's best seconds and passes, the ratio."""
    (result,) = [r for r in results(f"{name}.json")["results"] if r["l"] in (20000, 60000)][-1:]
    best = min(result["in_process"], key=lambda r: r["seconds"])
    expected = [f"{result['service']['seconds']:.1f} s", str(result["service"]["passes"]),
                f"{best['seconds']:.1f} s, {best['passes']} passes", f"{result['service_over_in_process']:.2f}x"]
    return table_row(page("docs/scaling.md"), label)[1:], expected


@pytest.mark.parametrize("name, label", [
    ("service_fit_sharded_20000_no_guards", "| 20,000, shards without guards"),
    ("service_fit_sharded_20000", "| 20,000, shards with guards"),
    ("service_fit_60000_one_worker", "| 60,000, one worker"),
    ("service_fit_60000", "| 60,000, the default threshold, centring and extension in one sharded pass"),
])
def test_the_service_fit_table_is_service_fit(name, label):
    cells, expected = service_fit_cells(name, label)
    assert cells == expected


def test_the_service_fit_threshold_is_its_results():
    threshold = next(r for r in results("service_fit_threshold_20000.json")["results"] if r["l"] == 20000)
    default = next(r for r in results("service_fit.json")["results"] if r["l"] == 20000)
    assert (f"the sharded fit at 20,000 rows took {threshold['service_over_in_process']:.2f}x the in-process fit, "
            f"over the 1.2x goal, where one worker's took {default['service_over_in_process']:.2f}x") in scaling()
    at_60000 = results("service_fit_60000.json")["results"][0]
    assert f"the sharded fit at 60,000 rows now takes {at_60000['service_over_in_process']:.2f}x" in scaling()


# -- every results file cited above ----------------------------------------------------------------------


@pytest.mark.parametrize("name", CITED)
def test_a_cited_results_file_names_its_commit(name):
    assert re.fullmatch(r"[0-9a-f]{40}", results(name)["environment"].get("commit") or ""), \
        f"{name}: written at no recorded commit"


# docs/choosing-a-solver.md: "What made the difference" (bench/hostile_figures.py) and "Time to an answer"'s prose
# (bench/time_to_accuracy.py).


def choosing() -> str:
    return page("docs/choosing-a-solver.md")


def sci(value: float, digits: int = 1) -> str:
    """``value`` as the docs write it: 2.0e6, 9.7e-4 (no + and no leading zero in the exponent)."""
    mantissa, exponent = f"{value:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def test_the_precision_rules_spreads_are_hostile_figures():
    spreads = list(results("hostile_figures.json")["spreads"].values())
    printed = said(choosing(), r"far outside: ([\d.e-]+), ([\d.e-]+), ([\d.e-]+) and ([\d.e-]+), "
                               r"`bench/results/hostile_figures.json`")
    assert list(printed) == [f"{spreads[0]:.1f}", *(sci(value) for value in spreads[1:])]


def test_the_appended_rows_figures_are_hostile_figures():
    appended, fresh = (results("hostile_figures.json")["partial_fit"][key] for key in ("appended", "fresh"))
    printed = said(choosing(), r"`partial_fit` of 1000 rows after a default fit on 3000 digits took (\d+) passes, "
                               r"([\d.]+) s, to an excess error of ([\d.e-]+), where a fresh default fit of the 4000 "
                               r"took (\d+) passes, ([\d.]+) s, to ([\d.e-]+)")
    assert list(printed) == [str(appended["passes"]), f"{appended['seconds']:.2f}", sci(appended["excess"]),
                             str(fresh["passes"]), f"{fresh['seconds']:.2f}", sci(fresh["excess"])]


def test_the_rskpca_figures_are_hostile_figures():
    document = results("hostile_figures.json")["rskpca"]
    default, tenth = document["rskpca default"], document["rskpca, at most a tenth of the rows"]
    nystrom = document[f"nystrom, {default['centres']} landmarks"]
    printed = said(choosing(), r"the default kept (\d+) centres \(variance ratio ([\d.]+)\) for an excess error of "
                               r"([\d.]+), where a tenth of the rows' (\d+) gave ([\d.]+), and `nystrom` with the same "
                               r"(\d+) landmarks ([\d.e-]+)")
    assert list(printed) == [str(default["centres"]), f"{default['variance_ratio']:.2f}", f"{default['excess']:.2f}",
                             str(tenth["centres"]), f"{tenth['excess']:.2f}", str(default["centres"]),
                             sci(nystrom["excess"])]


def test_the_time_to_an_answer_ratios_are_time_to_accuracy():
    """The first bullet's ratios: the default's whole fit over lanczos's at tol 1e-3, per size, on both data sets."""
    datasets = results("time_to_accuracy.json")["datasets"]
    text = section(choosing(), "## Time to an answer")

    def whole(name: str, size: str) -> str:
        methods = datasets[name][size]["methods"]
        return f"{methods['default']['seconds'] / methods['lanczos tol 0.001']['seconds']:.2f}"

    printed = said(text, r"The whole default fit takes ([\d.]+)x, ([\d.]+)x and ([\d.]+)x lanczos's time at tol 1e-3 "
                         r"on the digits at 8,000, 20,000 and 40,000 rows, and ([\d.]+)x, ([\d.]+)x and ([\d.]+)x on "
                         r"the patches")
    assert list(printed) == [whole(name, size) for name in ("digits", "patches") for size in ("8000", "20000", "40000")]
    at_100k = datasets["digits"]["100000"]["methods"]
    printed = said(text, r"To 1e-6 that is ([\d.]+)x, the whole fit ([\d.]+)x")
    assert list(printed) == [f"{at_100k['default']['time_to']['1e-06'] / at_100k['lanczos tol 0.001']['seconds']:.2f}",
                             f"{at_100k['default']['seconds'] / at_100k['lanczos tol 0.001']['seconds']:.2f}"]


def test_the_denoising_speed_table_is_denoise_profile():
    """docs/denoising.md's "Speed": each size's seconds and ratio to BM3D before and after, the stages' seconds
    and the PSNR before and after, from bench/results/denoise_profile_before.json and denoise_profile.json
    (issue 55; the quality over 36 cases is denoise_quality.json's)."""
    text = page("docs/denoising.md")
    before, after = results("denoise_profile_before.json"), results("denoise_profile.json")
    for size in (128, 256):
        b = next(c for c in before["cases"] if c["size"] == size)
        a = next(c for c in after["cases"] if c["size"] == size)
        row = (f"| {size} x {size} | {b['seconds']:.1f} s ({b['ratio_to_bm3d']:.1f}x BM3D) | {a['seconds']:.1f} s "
               f"({a['ratio_to_bm3d']:.1f}x BM3D) | {a['stages']['candidates']['seconds']:.1f} | "
               f"{a['stages']['second stage choice']['seconds']:.1f} | {a['stages']['final first stage']['seconds']:.1f} | "
               f"{b['psnr_db']:.2f} | {a['psnr_db']:.2f} |")
        assert row in text, row
    assert f"at\n{before['environment']['commit'][:7]}" in text and f"at {after['environment']['commit'][:7]}" in text


def test_the_scikit_learn_tables_are_their_results():
    """docs/scikit-learn.md's speed and memory tables (issue 56) as bench/vs_sklearn.py and
    bench/estimator_memory.py print them from their results files (``--markdown``), with the commits they ran
    at; and its constant-offset figure is what tests/kpca/test_kernel_pca.py holds to (within 1e-7)."""
    from bench import estimator_memory, vs_sklearn

    text = page("docs/scikit-learn.md")
    for module, name in ((vs_sklearn, "vs_sklearn.json"), (estimator_memory, "estimator_memory.json")):
        table = module.markdown(results(name))
        assert table in text, table
        assert f"at {results(name)['environment']['commit'][:7]}" in text


def test_the_object_store_table_is_its_results():
    """docs/scaling.md's object-store table (issue 57) as bench/object_store.py prints it from its results file,
    the commit it ran at, and the prose's ratios of s3fs's figures to obstore's."""
    from bench import object_store

    text, result = page("docs/scaling.md"), results("object_store.json")
    assert object_store.markdown(result) in text
    assert f"at {result['environment']['commit'][:7]}" in text
    ours, theirs = result["results"]["s3 obstore"], result["results"]["s3 s3fs"]
    records = [theirs[k] / ours[k] for k in ("create_ms", "get_ms", "compare_and_swap_ms")]
    chunks = [ours[k] / theirs[k] for k in ("chunk_put_mib_s", "chunk_get_mib_s")]
    assert (f"{min(records):.1f}-{max(records):.1f}x faster on records and {min(chunks):.1f}-{max(chunks):.1f}x on "
            "chunks") in " ".join(text.split())


def test_the_store_backends_table_is_its_results():
    """docs/scaling.md's table of the store's classes on each backend (issue 57) as bench/store_backends.py prints it
    from its results file, the commit it ran at, and the prose's figures of a pass."""
    from bench import store_backends

    text, result = page("docs/scaling.md"), results("store_backends.json")
    assert store_backends.markdown(result) in text
    assert f"at {result['environment']['commit'][:7]}" in text
    s3 = result["results"]["objects on S3 (moto)"]
    flat_text = " ".join(text.split())
    assert (f"one checkpoint, {s3['record_update_ms']:.0f} ms and "
            f"{result['checkpoint_mib'] / s3['checkpoint_save_mib_s']:.2f} s") in flat_text
    assert f"round trip ({s3['record_read_ms']:.1f} ms here" in flat_text


def test_the_object_store_goals_are_its_results():
    """docs/scaling.md's figures of the issue's goals (issue 57: an upload and a default fit through the object
    store against the folder, and their projections) as bench/object_store.py wrote them."""
    result = results("object_store.json")
    goals, service = result["goals"], result["service"]
    flat_text = " ".join(page("docs/scaling.md").split())
    mib = result["upload_rows"] * result["features"] * 4 / 2**20
    assert (f"an upload of {mib:.0f} MiB took {goals['upload_time_s3_over_folder']:.1f}x the folder's time in the "
            f"store ({service['s3']['upload_s']:.2f} s against {service['folder']['upload_s']:.2f} s) and "
            f"{goals['http_upload_time_s3_over_folder']:.1f}x over HTTP") in flat_text
    assert f"the default fit {goals['fit_time_s3_over_folder']:.2f}x" in flat_text
    assert goals["projections_max_relative_difference"] == 0.0 and "the same projections, bit for bit" in flat_text
