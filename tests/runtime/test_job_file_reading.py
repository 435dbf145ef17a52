"""Reading a job file: one that cannot be read, or is a directory, is named with the reason; a key a YAML
file (or a dict) gives twice is refused naming both places, while a .properties file keeps the last."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.runtime.config.config import Config
from samsa.runtime.config.loader import load_raw
from samsa.runtime.exceptions import ConfigError


def refused(source: Path | dict[str, object]) -> str:
    with pytest.raises(ConfigError) as info:
        load_raw(source)
    return str(info.value)


# -- files that cannot be read ----------------------------------------------------------------------------


def test_an_unreadable_job_file_is_named_with_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job.name: wc\n")
    # Root reads a chmod 000 file anyway, so the refusal the kernel gives another user is played here.
    real_read_text = Path.read_text

    def denied(self: Path, *args: object, **kwargs: object) -> str:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    assert refused(path).startswith(f"job config file {path} cannot be read (permission denied); ")


def test_a_directory_given_as_job_file_is_named_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "dirjob.yaml"
    path.mkdir()
    message = refused(path)
    assert message.startswith(f"job config file {path} is a directory; ")
    assert "does not exist" not in message


def test_a_missing_job_file_still_does_not_exist(tmp_path: Path) -> None:
    assert refused(tmp_path / "nope.yaml") == f"job config file {tmp_path / 'nope.yaml'} does not exist"


# -- a key given twice ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        # The review's case: an invalid first value silently replaced by a later one.
        (
            "job.name: wc\ntask.commit.ms: abc\ntask.window.ms: 5\ntask.commit.ms: 3000\n",
            "task.commit.ms",
            (2, 4),
        ),
        ("task:\n  commit.ms: 1\n  window.ms: 5\n  commit.ms: 2\n", "task.commit.ms", (2, 4)),
        ("task:\n  commit.ms: 1\ntask.commit.ms: 2\n", "task.commit.ms", (2, 3)),
        ("task.commit.ms: 2\ntask:\n  commit.ms: 1\n", "task.commit.ms", (1, 3)),
        # Two blocks of one prefix: the second would drop the first's keys.
        ("task:\n  commit.ms: 1\njob.name: wc\ntask:\n  window.ms: 5\n", "task", (1, 4)),
        ("{job.name: a, job.name: b}\n", "job.name", (1, 1)),
    ],
    ids=["flat", "nested", "nested-then-flat", "flat-then-nested", "two-blocks", "flow"],
)
def test_a_yaml_key_given_twice_is_refused_naming_both_lines(
    tmp_path: Path, text: str, key: str, lines: tuple[int, int]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    message = refused(path)
    assert message.startswith(f"{path}: {key} is given twice (line {lines[0]} and line {lines[1]}); keep one")


def test_a_yaml_merge_overridden_by_the_mapping_is_no_key_given_twice(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "defaults: &defaults\n  commit.ms: 1000\n  window.ms: 5\ntask:\n  <<: *defaults\n  commit.ms: 3000\n"
    )
    raw = load_raw(path)
    assert raw["task.commit.ms"] == "3000" and raw["task.window.ms"] == "5"


def test_yaml_keys_given_once_load_as_before(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "job.name: wc\ntask:\n  commit.ms: 1\n  window.ms: 2\nsystems.kafka.samza.factory: kafka\n"
    )
    assert load_raw(path) == {
        "job.name": "wc",
        "task.commit.ms": "1",
        "task.window.ms": "2",
        "systems.kafka.samza.factory": "kafka",
    }


def test_a_dict_spelling_a_key_nested_and_flat_is_refused() -> None:
    message = refused({"task": {"commit.ms": 1}, "task.commit.ms": 2})
    assert message.startswith("config: task.commit.ms is given twice (task: {commit.ms} and task.commit.ms)")
    with pytest.raises(ConfigError, match=r"task\.commit\.ms is given twice"):
        Config.load({"task.commit.ms": 2, "task": {"commit.ms": 1}})


def test_a_properties_file_keeps_the_last_value_of_a_key_given_twice_as_java_does(tmp_path: Path) -> None:
    path = tmp_path / "job.properties"
    path.write_text("task.commit.ms=abc\ntask.commit.ms=3000\n")
    assert load_raw(path) == {"task.commit.ms": "3000"}
