"""A result names the commit it was measured at, and whether the code had changes (bench._common.git_state)."""

import subprocess

from bench._common import git_state


def git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def test_results_written_by_an_earlier_run_do_not_make_the_code_dirty(tmp_path):
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "a.json").write_text("{}")
    (tmp_path / "kpca.py").write_text("x = 1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "one")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "bench" / "results" / "a.json").write_text('{"sizes": [8000]}')  # a --merge run added to it
    (tmp_path / "bench" / "results" / "b.png").write_bytes(b"png")
    state = git_state(tmp_path)
    assert state == {"commit": state["commit"], "dirty": False} and len(state["commit"]) == 40
    (tmp_path / "kpca.py").write_text("x = 2\n")  # the code changed: dirty
    assert git_state(tmp_path)["dirty"] is True
    (tmp_path / "kpca.py").write_text("x = 1\n")
    (tmp_path / "new_module.py").write_text("")  # an untracked module changes what runs too
    assert git_state(tmp_path)["dirty"] is True
