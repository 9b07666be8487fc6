"""`store.stop_flags`: a flag per token in the data folder, raised by any process, seen by the task."""

import os
import time

import pytest

from store.stop_flags import STALE_S, STOPS_FOLDER, StopFlags


def test_a_flag_is_raised_seen_and_cleared(tmp_path):
    flags, token = StopFlags(tmp_path), StopFlags.new_token()
    assert not flags.raised(token) and not flags.raised(None)
    flags.raise_flag(token)
    assert flags.raised(token) and StopFlags(tmp_path).raised(token)  # another handle: another process
    flags.clear(token)
    assert not flags.raised(token)
    flags.clear(token)  # twice: nothing to do


def test_stale_flags_go_when_another_is_raised(tmp_path):
    flags, old, new = StopFlags(tmp_path), StopFlags.new_token(), StopFlags.new_token()
    flags.raise_flag(old)
    then = time.time() - STALE_S - 10
    os.utime(tmp_path / STOPS_FOLDER / old, (then, then))  # a task that never ran to clear it
    flags.raise_flag(new)
    assert not flags.raised(old) and flags.raised(new)


@pytest.mark.parametrize("token", ["../x", "", "A" * 32, 7])
def test_only_tokens_name_files(tmp_path, token):
    with pytest.raises(ValueError, match="stop token"):
        StopFlags(tmp_path).raise_flag(token)


def test_a_checker_looks_at_most_every_interval_and_keeps_a_raised_answer(tmp_path):
    flags, token = StopFlags(tmp_path), StopFlags.new_token()
    assert flags.checker(None) is None
    asked = flags.checker(token, every_s=1.0)  # an interval that a loaded machine's raise_flag does not outlast
    assert not asked()
    flags.raise_flag(token)
    assert not asked()  # within the interval: its last look
    time.sleep(1.05)
    assert asked()
    flags.clear(token)
    assert asked()  # once raised, raised
    with pytest.raises(ValueError, match="stop token"):
        flags.checker("../x")
