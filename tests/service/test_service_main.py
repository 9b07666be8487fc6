"""Settings from the environment and the ``python -m service`` entry point (no server started)."""

from __future__ import annotations

from pathlib import Path

import pytest

import service.__main__ as entry
from service.settings import Settings, get_settings


@pytest.fixture
def clean_settings(monkeypatch):
    for key in ("HOST", "PORT", "DATA_DIR", "SCHEDULER", "N_WORKERS", "MAX_BODY_BYTES", "EXACT_LIMIT",
                "REGISTER_PREFIXES", "API_KEYS", "API_KEYS_FILE", "ALLOW_UNAUTHENTICATED", "ALLOWED_HOSTS",
                "CORS_ORIGINS", "API_PROCESSES"):
        monkeypatch.delenv(f"KPCA_{key}", raising=False)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_defaults(clean_settings):
    settings = Settings()
    assert (settings.host, settings.port, settings.data_dir) == ("127.0.0.1", 8000, Path("./data"))
    assert settings.scheduler is None
    assert settings.n_workers is None  # automatic: sized to the machine (workers.dask_cluster.embedded_sizing)
    assert settings.max_body_bytes == 64 * 1024 * 1024
    assert settings.exact_limit == 3000


def test_environment_with_kpca_prefix(clean_settings):
    clean_settings.setenv("KPCA_PORT", "9001")
    clean_settings.setenv("KPCA_SCHEDULER", "tcp://scheduler:8786")
    clean_settings.setenv("KPCA_MAX_BODY_BYTES", "1024")
    settings = get_settings()
    assert settings.port == 9001
    assert settings.scheduler == "tcp://scheduler:8786"
    assert settings.max_body_bytes == 1024
    assert get_settings() is settings


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, []),  # registration disabled unless configured
        ("/data/arrays", ["/data/arrays"]),
        ("/data/a, /data/b ,s3://bucket/", ["/data/a", "/data/b", "s3://bucket/"]),
        ('["/data/a", "gs://b/"]', ["/data/a", "gs://b/"]),
        ("", []),
    ],
)
def test_register_prefixes_from_the_environment(clean_settings, value, expected):
    if value is not None:
        clean_settings.setenv("KPCA_REGISTER_PREFIXES", value)
    assert Settings().register_prefixes == expected


@pytest.mark.parametrize("value", ["relative/dir", "[1, 2]", "[not json", '["/ok", "rel"]'])
def test_bad_register_prefixes_are_refused(clean_settings, value):
    clean_settings.setenv("KPCA_REGISTER_PREFIXES", value)
    with pytest.raises(ValueError, match="register_prefixes"):
        Settings()


def test_blank_scheduler_means_embedded(clean_settings):
    clean_settings.setenv("KPCA_SCHEDULER", "")
    assert Settings().scheduler is None


def test_main_builds_the_app_and_runs_uvicorn(clean_settings, tmp_path):
    clean_settings.setenv("KPCA_PORT", "9002")
    clean_settings.setenv("KPCA_API_PROCESSES", "1")  # one process: the app itself (several: test_api_processes)
    clean_settings.setenv("KPCA_API_KEYS", "main-test-key:write")  # listening on 0.0.0.0 needs keys
    calls = {}

    def fake_run(app, host, port, **options):
        calls.update(app=app, host=host, port=port)

    clean_settings.setattr(entry.uvicorn, "run", fake_run)
    clean_settings.setattr(entry.logging, "basicConfig", lambda **kwargs: None)
    entry.main(["--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert calls["host"] == "0.0.0.0"
    assert calls["port"] == 9002  # from the environment
    assert calls["app"].state.settings.data_dir == tmp_path
    assert calls["app"].title == "kpca-stream"


def test_embedded_workers_from_the_environment(clean_settings):
    clean_settings.setenv("KPCA_N_WORKERS", "3")
    assert Settings().n_workers == 3
    clean_settings.setenv("KPCA_N_WORKERS", " ")  # blank: automatic
    assert Settings().n_workers is None
    clean_settings.setenv("KPCA_N_WORKERS", "0")
    with pytest.raises(ValueError, match="n_workers"):
        Settings()


def test_every_setting_is_a_flag_with_its_description_and_variable(clean_settings, capsys):
    with pytest.raises(SystemExit) as done:
        entry.settings_from(["--help"])
    assert done.value.code == 0
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, also after hyphens
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        assert flag in text and f"KPCA_{name.upper()}" in text, name
        assert field.description and "".join(field.description.split()) in text, name


def test_flags_override_the_environment_which_still_counts(clean_settings, tmp_path):
    clean_settings.setenv("KPCA_PORT", "9001")
    clean_settings.setenv("KPCA_MAX_FITS_PER_KEY", "2")
    settings = entry.settings_from(["--max-fits-per-key", "3", "--allowed-hosts", "a.example,b.example",
                                    "--data-dir", str(tmp_path), "--allow-unauthenticated"])
    assert settings.port == 9001 and settings.max_fits_per_key == 3
    assert settings.allowed_hosts == ["a.example", "b.example"] and settings.data_dir == tmp_path
    assert settings.allow_unauthenticated is True


@pytest.mark.parametrize("argv, named", [
    (["--port", "99999"], "--port (KPCA_PORT)"),
    (["--max-body-bytes", "lots"], "--max-body-bytes (KPCA_MAX_BODY_BYTES)"),
    (["--api-keys", "very-secret-key:admin"], "api_keys"),
    (["--api-key", "very-secret-key"], "unrecognized arguments: --api-key"),
])
def test_invalid_flags_exit_2_naming_the_flag_without_echoing_values(clean_settings, capsys, argv, named):
    with pytest.raises(SystemExit) as done:
        entry.settings_from(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert named in err and "very-secret-key" not in err, err


def test_an_unknown_background_policy_stops_the_start_naming_its_variable(clean_settings, capsys):
    clean_settings.setenv("KPCA_BACKGROUND_POLICY", "fastest")
    with pytest.raises(SystemExit) as done:
        entry.main([])
    assert done.value.code == 2
    assert "KPCA_BACKGROUND_POLICY" in capsys.readouterr().err


def test_api_processes_one_per_core_at_most_four_unless_configured(clean_settings):
    from service.processes import api_process_count

    assert [api_process_count(Settings(), cores) for cores in (1, 2, 3, 16)] == [1, 2, 3, 4]
    clean_settings.setenv("KPCA_API_PROCESSES", "1")
    assert api_process_count(Settings(), 16) == 1
    clean_settings.setenv("KPCA_API_PROCESSES", " ")  # blank: automatic
    assert Settings().api_processes is None
    clean_settings.setenv("KPCA_API_PROCESSES", "0")
    with pytest.raises(ValueError, match="api_processes"):
        Settings()


def test_the_data_location_is_a_folder_or_an_s3_url_and_nothing_else(clean_settings, capsys, tmp_path, monkeypatch):
    """KPCA_DATA_DIR=s3://bucket/prefix is kept as the URL it is (a `Path` made it a folder named "s3:" in the working
    directory, where the service ran); any other URL stops the start saying what to give (issue 57)."""
    monkeypatch.chdir(tmp_path)
    clean_settings.setenv("KPCA_DATA_DIR", "s3://bucket/prefix/")
    assert entry.settings_from([]).data_dir == "s3://bucket/prefix"
    clean_settings.setenv("KPCA_DATA_DIR", "gs://bucket/prefix")
    with pytest.raises(SystemExit) as done:
        entry.settings_from([])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "--data-dir (KPCA_DATA_DIR)" in err and "s3://bucket/prefix" in err and "folder" in err, err
    assert not (tmp_path / "s3:").exists() and not (tmp_path / "gs:").exists()
    clean_settings.delenv("KPCA_DATA_DIR")
    assert Settings(data_dir="relative/data").data_dir.name == "data"  # a path is a path
