"""Unit tests of the job config: loading (.properties, YAML, dict), key registry, JobConfig, `config keys`."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig, parse_stream
from samsa.runtime.config.loader import load_raw, parse_properties
from samsa.runtime.exceptions import ConfigError
from samsa.streams import SystemStream


def job_dict(**extra: str) -> dict[str, str]:
    """A minimal valid job config; `extra` keys use `__` for dots."""
    config = {
        "job.name": "wordcount",
        "task.class": "mytasks:WordCount",
        "task.inputs": "kafka.words",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
    }
    config.update({k.replace("__", "."): v for k, v in extra.items()})
    return config


def config_error(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        Config(raw)
    return str(info.value)


# --- .properties ---------------------------------------------------------------------------------------


def test_properties_comments_separators_and_continuations() -> None:
    text = (
        "# a comment\n"
        "! a bang comment\n"
        "   # an indented comment\n"
        "\n"
        "job.name = wordcount\n"
        "task.class: mytasks:WordCount\n"
        "task.inputs = kafka.a, \\\n"
        "    kafka.b, \\\n"
        "    kafka.c\n"
        "systems.kafka.bootstrap.servers=localhost:9092,other:9093\n"
        "app.note = a#b=c\n"
        "   job.id   =   7   \n"
    )
    assert parse_properties(text) == {
        "job.name": "wordcount",
        "task.class": "mytasks:WordCount",
        "task.inputs": "kafka.a, kafka.b, kafka.c",
        "systems.kafka.bootstrap.servers": "localhost:9092,other:9093",
        "app.note": "a#b=c",
        "job.id": "7",
    }


def test_properties_comment_marker_inside_a_continuation_is_text() -> None:
    # Java reads a continued line as part of the value, even when it starts with # or !.
    assert parse_properties("a = x\\\n  #y\n") == {"a": "x#y"}


def test_properties_continuation_on_the_last_line_keeps_the_key() -> None:
    # A file whose last line ends in a backslash (no newline after) still holds that key, as in Java.
    assert parse_properties("job.name = wc\ntask.inputs = kafka.a, \\") == {
        "job.name": "wc",
        "task.inputs": "kafka.a,",
    }


def test_properties_java_escapes_in_keys_and_values() -> None:
    text = (
        "greeting = hello\\u0020world\\u0021\n"
        "path\\:with\\=seps = a\\:b\\=c\n"
        "tabbed = a\\tb\n"
        "windows = C:\\\\dir\\\\file\n"
        "kept.blank = x\\ \n"
        "plain\\ key = v\n"
        "even = ends in a backslash\\\\\n"
        "next = not a continuation\n"
    )
    assert parse_properties(text) == {
        "greeting": "hello world!",
        "path:with=seps": "a:b=c",
        "tabbed": "a\tb",
        "windows": "C:\\dir\\file",
        "kept.blank": "x ",
        "plain key": "v",
        "even": "ends in a backslash\\",
        "next": "not a continuation",
    }


def test_properties_whitespace_separates_key_and_value() -> None:
    text = "job.name wordcount\ntask.inputs\tkafka.a,kafka.b\njob.id   :  7\nflag\n  a  b = c \n"
    assert parse_properties(text) == {
        "job.name": "wordcount",
        "task.inputs": "kafka.a,kafka.b",
        "job.id": "7",
        "flag": "",
        "a": "b = c",
    }


def test_properties_later_duplicate_wins() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("job.name=wc\n# ok\nsep = \\u00zz\n", 3, "\\u00zz"),
        ("=value\n", 1, "=value"),
        ("job.name=wc\n: value\n", 2, ": value"),
    ],
)
def test_properties_malformed_line_names_file_and_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_properties(text, "job.properties")
    assert f"job.properties:{line}:" in str(info.value)
    assert fragment in str(info.value)


def test_properties_file_error_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "job.properties"
    path.write_text("job.name=wc\nbroken = \\u12\n")
    with pytest.raises(ConfigError, match=rf"{path}:2:"):
        load_raw(path)


def test_properties_file_loads_into_typed_config(tmp_path: Path) -> None:
    path = tmp_path / "job.properties"
    path.write_text(
        "job.name=wc\njob.container.count: 3\ntask.window.ms=-1\n"
        "systems.kafka.streams.page.views.samza.bootstrap=true\n"
    )
    config = Config.load(path)
    assert config.value("job.container.count") == 3
    assert config.value("task.window.ms") == -1
    assert config.value("systems.kafka.streams.page.views.samza.bootstrap") is True
    assert config["job.container.count"] == "3"  # raw text stays available


# --- YAML and dict ---------------------------------------------------------------------------------------


def test_yaml_flat_keys_with_native_values_become_text(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "job.name: wc\n"
        "job.container.count: 2\n"
        "task.window.ms: -1\n"
        "task.inputs: [kafka.a, kafka.b]\n"
        "systems.kafka.streams.words.samza.bootstrap: true\n"
        "systems.kafka.streams.words.samza.reset.offset: no\n"
        "app.ratio: 0.5\n"
    )
    assert load_raw(path) == {
        "job.name": "wc",
        "job.container.count": "2",
        "task.window.ms": "-1",
        "task.inputs": "kafka.a,kafka.b",
        "systems.kafka.streams.words.samza.bootstrap": "true",
        "systems.kafka.streams.words.samza.reset.offset": "false",
        "app.ratio": "0.5",
    }
    config = Config.load(path)
    assert config.value("job.container.count") == 2
    assert config.value("task.inputs") == ["kafka.a", "kafka.b"]
    assert config.value("systems.kafka.streams.words.samza.bootstrap") is True
    assert config.value("systems.kafka.streams.words.samza.reset.offset") is False


@pytest.mark.parametrize("written", ["007", "0123", "1_000", "1e3", "0x1f", "2026-01-02", "no", "1.50"])
def test_yaml_scalars_of_string_keys_stay_as_written_as_in_properties(tmp_path: Path, written: str) -> None:
    # job.id names the job's topics and state dirs: a job moved between formats keeps its checkpoints.
    (tmp_path / "job.yaml").write_text(f"job.name: {written}\njob.id: {written}\napp.note: {written}\n")
    (tmp_path / "job.properties").write_text(f"job.name={written}\njob.id={written}\napp.note={written}\n")
    expected = {"job.name": written, "job.id": written, "app.note": written}
    assert load_raw(tmp_path / "job.yaml") == load_raw(tmp_path / "job.properties") == expected


def test_yaml_boolean_words_still_set_boolean_keys(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "systems.kafka.streams.a.samza.bootstrap: yes\n"
        "systems.kafka.streams.b.samza.bootstrap: On\n"
        "systems.kafka.streams.c.samza.bootstrap: False\n"
        "job.name: off\n"
    )
    config = Config.load(path)
    assert [config.value(f"systems.kafka.streams.{s}.samza.bootstrap") for s in "abc"] == [True, True, False]
    assert config.value("job.name") == "off"


def test_yaml_nested_keys_flatten_with_dots(tmp_path: Path) -> None:
    path = tmp_path / "job.yml"
    path.write_text(
        "job:\n"
        "  name: wc\n"
        "  container.count: 2\n"
        "task:\n"
        "  inputs:\n"
        "    - kafka.words\n"
        "    - kafka.page.views\n"
        "systems:\n"
        "  kafka:\n"
        "    samza.factory: kafka\n"
        "    bootstrap.servers: localhost:9092\n"
        "    consumer:\n"
        "      fetch.min.bytes: 1\n"
        "    streams:\n"
        "      page.views:\n"
        "        samza:\n"
        "          msg.serde: json\n"
    )
    assert load_raw(path) == {
        "job.name": "wc",
        "job.container.count": "2",
        "task.inputs": "kafka.words,kafka.page.views",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "systems.kafka.consumer.fetch.min.bytes": "1",
        "systems.kafka.streams.page.views.samza.msg.serde": "json",
    }


def test_yaml_key_without_value_is_named(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job:\n  name:\n")
    with pytest.raises(ConfigError, match=r"job\.name has no value") as info:
        load_raw(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("bad.yaml", "job.name: [unclosed\n", "not valid YAML"),
        ("list.yaml", "- job.name\n- wc\n", "must hold a mapping"),
        ("job.json", "{}", r"\.properties, \.yaml or \.yml"),
    ],
)
def test_unreadable_files_are_named(tmp_path: Path, name: str, text: str, match: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        load_raw(path)
    assert str(path) in str(info.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as info:
        load_raw(tmp_path / "nope.properties")
    assert "nope.properties" in str(info.value)


def test_empty_yaml_is_an_empty_config(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_raw(path) == {}


def test_dict_input_flat_nested_and_native_values() -> None:
    config = Config.load(
        {
            "job": {"name": "wc", "container.count": 2},
            "task.inputs": ["kafka.a", "kafka.b"],
            "systems.kafka.streams.words.samza.bootstrap": True,
        }
    )
    assert dict(config) == {
        "job.name": "wc",
        "job.container.count": "2",
        "task.inputs": "kafka.a,kafka.b",
        "systems.kafka.streams.words.samza.bootstrap": "true",
    }
    assert config.value("job.container.count") == 2
    assert config.value("systems.kafka.streams.words.samza.bootstrap") is True


def test_dict_input_validates_like_a_file() -> None:
    with pytest.raises(ConfigError, match=r"task\.comit\.ms"):
        Config.load({"task": {"comit.ms": 5}})


# --- the registry: unknown keys, user keys, values --------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("job.nmae", "job.name"),
        ("task.comit.ms", "task.commit.ms"),
        ("systems.kafka.samza.factroy", "systems.kafka.samza.factory"),
        ("stores.counts.factroy", "stores.counts.factory"),
        ("serializers.registry.avro.clas", "serializers.registry.avro.class"),
        ("metrics.prometheus.prot", "metrics.prometheus.port"),
        ("deploy.local.max.restart", "deploy.local.max.restarts"),
        ("blobstore.s3.buckt", "blobstore.s3.bucket"),
    ],
)
def test_unknown_key_under_each_governed_prefix_fails_with_a_suggestion(key: str, suggestion: str) -> None:
    message = config_error({key: "1"})
    assert repr(key) in message
    assert f"did you mean {suggestion!r}" in message


def test_unknown_key_with_a_dotted_stream_suggests_the_full_stream_name() -> None:
    # The suggestion must keep the whole stream name, not just its first dotted segment.
    message = config_error({"systems.kafka.streams.page.views.samza.bootstrp": "true"})
    assert "systems.kafka.streams.page.views.samza.bootstrp" in message
    assert "did you mean 'systems.kafka.streams.page.views.samza.bootstrap'" in message


def test_unknown_key_far_from_any_points_to_config_keys() -> None:
    message = config_error({"task.zzzzzzzzzzzzzzzzzzzz": "1"})
    assert "task.zzzzzzzzzzzzzzzzzzzz" in message
    assert "samsa config keys" in message


@pytest.mark.parametrize(
    ("key", "wrong"),
    [
        ("task.checkpoint.factory", "stores.checkpoint.factory"),
        ("stores.sums.rocksdb.ttl.ms", "stores.sums.rocksdb.compression"),
        ("systems.kafka.samza.fetch.threshold", "systems.kafka.samza.factory"),
        ("systems.kafka.streams.page.views.samza.priority", "samza.bootstrap'"),
        ("task.drop.deserialization.errors", "task.deserialization.error.policy'"),
    ],
)
def test_samza_keys_samsa_lacks_are_named_as_such_not_corrected(key: str, wrong: str) -> None:
    message = config_error({key: "1"})
    assert message.startswith(f"{key} is a Samza key not supported by Samsa: ")
    assert "did you mean" not in message and wrong not in message


@pytest.mark.parametrize(
    "key",
    [
        "task.counts.factory",  # a `stores.<s>.factory` with the store 'counts', but a task. key
        "task.checkpoint.retention",
        "systems.kafka.samza.fetch.size",
        "stores.sums.rocksdb.ttl",
        "task.opts.extra",
    ],
)
def test_a_suggestion_keeps_the_keys_first_segment_and_is_only_a_typo_away(key: str) -> None:
    message = config_error({key: "1"})
    assert "did you mean" not in message, message
    assert "samsa config keys" in message


def test_samza_keys_samsa_lacks_are_not_listed_as_keys(
    config_keys_output: dict[str, tuple[str, str]],
) -> None:
    assert "task.checkpoint.factory" not in config_keys_output
    assert "stores.<s>.rocksdb.ttl.ms" not in config_keys_output


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("store.sums.key.serde", "stores.sums.key.serde"),
        ("tasks.commit.ms", "task.commit.ms"),
        (
            "system.kafka.streams.words.samza.offset.default",
            "systems.kafka.streams.words.samza.offset.default",
        ),
        ("serializer.registry.mine.class", "serializers.registry.mine.class"),
        ("Job.name", "job.name"),
    ],
)
def test_a_misspelled_samsa_prefix_is_an_error_with_the_key_meant(key: str, meant: str) -> None:
    message = config_error({key: "oldest"})
    assert repr(key) in message and f"did you mean {meant!r}" in message


@pytest.mark.parametrize(
    "key", ["wordcount.output.stream", "sum.output.stream", "tasks.mine", "store.url", "jobs.commit.owner"]
)
def test_user_keys_near_a_samsa_prefix_but_no_known_key_are_kept(key: str) -> None:
    assert Config({key: "x"})[key] == "x"


@pytest.mark.parametrize("key", ["app.threshold", "test.output", "jobs.x", "mytask.stores.x", "job"])
def test_user_keys_outside_governed_prefixes_are_kept(key: str) -> None:
    config = Config({key: "anything at all"})
    assert config[key] == "anything at all"
    assert config.value(key) == "anything at all"


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("job.container.count", "two", "not an integer"),
        ("task.commit.ms", "1s", "not an integer"),
        ("metrics.prometheus.port", "9o90", "not an integer"),
        ("systems.kafka.streams.words.samza.bootstrap", "yes", "not a boolean"),
        ("systems.kafka.streams.page.views.samza.reset.offset", "1", "not a boolean"),
        ("task.deserialization.error.policy", "ignore", "not one of fail, skip, dlq"),
        ("systems.kafka.samza.offset.default", "earliest", "not one of oldest, upcoming"),
        ("task.class", "WordCount", "module:Class"),
        ("stores.counts.factory", "leveldb", "module:Class"),
    ],
)
def test_malformed_values_name_the_key(key: str, value: str, words: str) -> None:
    message = config_error({key: value})
    assert f"{key}={value!r}" in message
    assert words in message


@pytest.mark.parametrize(
    ("key", "typo", "fix"),
    [
        ("task.deserialization.error.policy", "skp", "skip"),
        ("job.processing.guarantee", "at_least_onse", "at_least_once"),
        ("systems.kafka.samza.offset.default", "upcomming", "upcoming"),
        ("systems.kafka.streams.page.views.samza.offset.default", "oldst", "oldest"),
    ],
)
def test_enum_typo_gets_a_suggestion(key: str, typo: str, fix: str) -> None:
    message = config_error({key: typo})
    assert key in message
    assert f"did you mean {fix!r}" in message


@pytest.mark.parametrize("key", ["task.commit.ms", "task.window.ms"])
def test_timers_accept_minus_one_to_turn_off(key: str) -> None:
    assert Config({key: "-1"}).value(key) == -1
    assert Config({key: " 250 "}).value(key) == 250


@pytest.mark.parametrize("key", ["task.commit.ms", "task.window.ms"])
def test_timers_reject_other_negatives(key: str) -> None:
    message = config_error({key: "-5"})
    assert key in message
    assert "-1 to turn it off" in message


@pytest.mark.parametrize("value", ["0", "-1"])
def test_container_count_below_one_is_rejected(value: str) -> None:
    message = config_error({"job.container.count": value})
    assert "job.container.count" in message
    assert "at least 1" in message


def test_bool_and_int_values_tolerate_case_and_spaces() -> None:
    config = Config({"systems.kafka.streams.words.samza.bootstrap": " TRUE ", "job.container.count": " 4 "})
    assert config.value("systems.kafka.streams.words.samza.bootstrap") is True
    assert config.value("job.container.count") == 4


@pytest.mark.parametrize("value", ["mytasks:WordCount", "mytasks.WordCount", "pkg.sub.mod:Task"])
def test_class_paths_are_accepted(value: str) -> None:
    assert Config({"task.class": value}).value("task.class") == value


# Every key of CONFIG.md, as a concrete key, a valid sample value, and its documented default
# (NO_DEFAULT: unset means None; COMPUTED: the default is derived elsewhere, checked in JobConfig tests).
NO_DEFAULT: Any = None
COMPUTED = object()
CONFIG_MD: list[tuple[str, str, Any]] = [
    # Job and tasks
    ("job.name", "wordcount", NO_DEFAULT),
    ("job.id", "2", "1"),
    ("task.class", "mytasks:WordCount", NO_DEFAULT),
    ("task.inputs", "kafka.a,kafka.b", NO_DEFAULT),
    ("task.broadcast.inputs", "kafka.b#0,kafka.c#[0-3]", NO_DEFAULT),
    ("task.outputs", "kafka.out", NO_DEFAULT),
    ("job.container.count", "3", 1),
    ("task.commit.ms", "1000", 60000),
    ("task.window.ms", "500", -1),
    ("task.commit.max.delay.ms", "1000", 60000),
    ("task.commit.timeout.ms", "1000", 1800000),
    ("task.deserialization.error.policy", "dlq", "fail"),
    ("job.processing.guarantee", "at_least_once", "at_least_once"),
    ("task.eos.buffer.max.bytes", "1024", 1073741824),
    ("task.eos.barrier.timeout.ms", "1000", 60000),
    ("job.logged.store.base.dir", "/var/state", "./state"),
    ("job.non-logged.store.base.dir", "/var/tmpstate", "./state"),
    ("job.deploy", "local", "local"),
    ("deploy.spark.master", "spark://host:7077", COMPUTED),
    ("deploy.spark.conf.spark.executor.memory", "2g", NO_DEFAULT),
    ("deploy.spark.max.restarts", "3", 10),
    ("deploy.spark.heartbeat.timeout.ms", "1000", 30000),
    ("metrics.prometheus.port", "9100", NO_DEFAULT),
    # Systems and streams
    ("systems.kafka.samza.factory", "kafka", NO_DEFAULT),
    ("systems.kafka.bootstrap.servers", "localhost:9092", NO_DEFAULT),
    ("systems.kafka.consumer.fetch.min.bytes", "1", NO_DEFAULT),
    ("systems.kafka.producer.linger.ms", "5", NO_DEFAULT),
    ("systems.kafka.samza.key.serde", "string", "bytes"),
    ("systems.kafka.samza.msg.serde", "json", "bytes"),
    ("systems.kafka.streams.page.views.samza.key.serde", "string", COMPUTED),
    ("systems.kafka.streams.page.views.samza.msg.serde", "json", COMPUTED),
    ("systems.kafka.streams.page.views.samza.bootstrap", "true", False),
    ("systems.kafka.streams.page.views.samza.reset.offset", "true", False),
    ("systems.kafka.streams.page.views.samza.offset.default", "oldest", COMPUTED),
    ("systems.kafka.streams.page.views.samza.intermediate", "true", False),
    ("serializers.registry.mine.class", "myserdes:MySerdeFactory", NO_DEFAULT),
    # Stores
    ("stores.counts.factory", "rocksdb", NO_DEFAULT),
    ("stores.counts.key.serde", "string", "bytes"),
    ("stores.counts.msg.serde", "json", "bytes"),
    ("stores.counts.changelog", "kafka.counts-changelog", NO_DEFAULT),
    ("stores.backup.factories", "changelog,blobstore", COMPUTED),
    ("stores.counts.backup.factories", "blobstore", COMPUTED),
    ("stores.restore.factories", "changelog", COMPUTED),
    ("stores.counts.restore.factories", "blobstore", COMPUTED),
    ("blobstore.local.dir", "/var/blobs", COMPUTED),
    ("blobstore.s3.bucket", "bucket", NO_DEFAULT),
    ("blobstore.s3.prefix", "jobs/", NO_DEFAULT),
    ("blobstore.s3.endpoint.url", "http://localhost:9000", NO_DEFAULT),
    ("blobstore.s3.region", "eu-west-1", NO_DEFAULT),
    # Adjunct stores
    ("stores.users.adstore.input", "kafka.users", NO_DEFAULT),
    ("stores.users.adstore.key.value.extractor.factory", "debezium", COMPUTED),
    ("stores.adstore.manager.factory", "mymod:Manager", COMPUTED),
    ("stores.users.adstore.max.staleness.ms", "1000", 86400000),
]


@pytest.mark.parametrize(("key", "sample", "default"), CONFIG_MD, ids=[row[0] for row in CONFIG_MD])
def test_every_config_md_key_is_accepted_with_its_default_or_rejected_as_not_yet(
    key: str, sample: str, default: Any
) -> None:
    try:
        Config({key: sample})
    except ConfigError as e:
        assert "not supported yet" in str(e), f"{key} rejected for another reason: {e}"
        assert key in str(e)
        return
    if default is not COMPUTED:
        assert Config({}).value(key) == default


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("job.processing.guarantee", "exactly_once"),
        ("job.deploy", "spark"),
        ("systems.kafka.samza.factory", "inmemory"),
        ("stores.counts.factory", "inmemory"),
        ("stores.counts.factory", "mystores:Engine"),
        ("systems.kafka.samza.factory", "kafka"),
    ],
)
def test_every_config_md_value_is_accepted_or_rejected_as_not_yet(key: str, value: str) -> None:
    try:
        config = Config({key: value})
    except ConfigError as e:
        assert "not supported yet" in str(e)
        assert f"{key}={value}" in str(e)
        return
    assert config.value(key) == value


def test_exactly_once_is_a_supported_guarantee() -> None:
    assert Config({"job.processing.guarantee": "exactly_once"}).value("job.processing.guarantee") == (
        "exactly_once"
    )
    assert "is not one of at_least_once, exactly_once" in config_error({"job.processing.guarantee": "twice"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("systems.kafka.consumer.auto.offset.reset", "earliest"),
        ("systems.kafka.consumer.security.protocol", "SASL_SSL"),
        ("systems.kafka.consumer.sasl.jaas.config", 'x required username="u" password="p=";'),
        ("systems.kafka.producer.compression.type", "zstd"),
        ("systems.kafka.producer.enable.idempotence", "true"),
        ("systems.kafka.consumer.bootstrap.servers", "h:1"),
    ],
)
def test_librdkafka_pass_through_keys_are_kept_verbatim(key: str, value: str) -> None:
    config = Config({key: value})
    assert config.value(key) == value
    prefix = key.split(".")[0] + "." + key.split(".")[1] + "." + key.split(".")[2] + "."
    assert config.subset(prefix) == {key[len(prefix) :]: value}


@pytest.mark.parametrize("stream", ["words", "page.views", "a.b.c.d", "page-views_v2.x"])
@pytest.mark.parametrize("setting", ["key.serde", "msg.serde"])
def test_dotted_stream_names_in_stream_keys(stream: str, setting: str) -> None:
    key = f"systems.kafka.streams.{stream}.samza.{setting}"
    config = Config({key: "json"})
    assert config.value(key) == "json"
    found = config.registry.lookup(key)
    assert found is not None
    assert found[0].pattern == f"systems.<sys>.streams.<stream>.samza.{setting}"
    assert found[1] == ("kafka", stream)


def test_config_rejects_bad_override() -> None:
    config = Config(job_dict())
    with pytest.raises(ConfigError, match=r"task\.comit\.ms"):
        config.with_overrides({"task.comit.ms": "5"})
    assert config.with_overrides({"job.container.count": "2"}).value("job.container.count") == 2
    assert config.value("job.container.count") == 1  # the original is unchanged


def test_required_names_the_missing_key() -> None:
    with pytest.raises(ConfigError, match=r"task\.inputs is required"):
        Config({"task.inputs": " , "}).required("task.inputs")
    with pytest.raises(ConfigError, match=r"job\.name is required"):
        Config({}).required("job.name")


def test_mapping_interface_holds_raw_text() -> None:
    config = Config({"job.container.count": "2", "app.x": "y"})
    assert len(config) == 2
    assert set(config) == {"job.container.count", "app.x"}
    assert config["job.container.count"] == "2"


# --- JobConfig ------------------------------------------------------------------------------------------


def test_job_config_defaults() -> None:
    job = JobConfig(Config(job_dict()))
    assert job.name == "wordcount"
    assert job.id == "1"
    assert job.job_key == "wordcount-1"
    assert job.task_class == "mytasks:WordCount"
    assert job.inputs == [SystemStream("kafka", "words")]
    assert job.outputs == []
    assert job.container_count == 1
    assert job.commit_ms == 60000
    assert job.window_ms == -1
    assert job.deserialization_policy == "fail"
    assert job.logged_store_dir == Path("./state")
    assert job.non_logged_store_dir == Path("./state")
    assert job.prometheus_port is None
    assert job.dlq_stream("kafka") == SystemStream("kafka", "samsa-dlq-wordcount-1")


def test_job_config_dotted_stream_names_and_outputs() -> None:
    job = JobConfig(
        Config(job_dict(task__inputs="kafka.page.views, kafka.words", task__outputs="kafka.out.v1"))
    )
    assert job.inputs == [SystemStream("kafka", "page.views"), SystemStream("kafka", "words")]
    assert job.outputs == [SystemStream("kafka", "out.v1")]


def test_stream_settings_fall_back_to_the_system_then_the_default() -> None:
    job = JobConfig(
        Config(
            job_dict(
                task__inputs="kafka.words,kafka.page.views,other.x",
                task__checkpoint__system="kafka",  # required: the inputs are on two systems
                systems__kafka__samza__msg__serde="json",
                systems__kafka__samza__offset__default="oldest",
                **{
                    "systems.kafka.streams.page.views.samza.key.serde": "string",
                    "systems.kafka.streams.page.views.samza.msg.serde": "avro",
                    "systems.kafka.streams.page.views.samza.offset.default": "upcoming",
                    "systems.kafka.streams.page.views.samza.bootstrap": "true",
                    "systems.kafka.streams.page.views.samza.reset.offset": "true",
                    "systems.other.samza.factory": "kafka",
                    "systems.other.bootstrap.servers": "h:1",
                },
            )
        )
    )
    words = job.stream(SystemStream("kafka", "words"))
    assert (words.key_serde, words.msg_serde, words.offset_default) == ("bytes", "json", "oldest")
    assert (words.bootstrap, words.reset_offset) == (False, False)
    views = job.stream(SystemStream("kafka", "page.views"))
    assert (views.key_serde, views.msg_serde, views.offset_default) == ("string", "avro", "upcoming")
    assert (views.bootstrap, views.reset_offset) == (True, True)
    other = job.stream(SystemStream("other", "x"))
    assert (other.key_serde, other.msg_serde, other.offset_default) == ("bytes", "bytes", "upcoming")


def test_systems_settings_and_bootstrap_alias() -> None:
    raw = job_dict(**{"systems.kafka.consumer.fetch.min.bytes": "1", "systems.kafka.producer.acks": "all"})
    del raw["systems.kafka.bootstrap.servers"]
    raw["systems.kafka.consumer.bootstrap.servers"] = "broker:9092"
    system = JobConfig(Config(raw)).systems["kafka"]
    assert system.factory == "kafka"
    assert system.bootstrap_servers == "broker:9092"
    assert system.consumer == {"fetch.min.bytes": "1", "bootstrap.servers": "broker:9092"}
    assert system.producer == {"acks": "all"}


def test_undefined_system_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        JobConfig(Config(job_dict(task__inputs="kafka.words,other.clicks")))
    assert "systems.other.samza.factory" in str(info.value)
    assert "'other'" in str(info.value)


def test_undefined_output_system_is_named() -> None:
    with pytest.raises(ConfigError, match=r"systems\.sink\.samza\.factory"):
        JobConfig(Config(job_dict(task__outputs="sink.out")))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("stores.counts.changelog", "other.counts-cl"),
        ("task.checkpoint.system", "other"),
        ("task.deserialization.dlq.stream", "other.dlq"),
        ("stores.ref.adstore.input", "other.ref"),
        ("task.broadcast.inputs", "other.ref#0"),
        ("task.outputs", "other.out"),
    ],
)
def test_every_key_naming_an_undefined_system_is_a_config_error_naming_the_key(key: str, value: str) -> None:
    raw = job_dict(stores__counts__factory="rocksdb", stores__ref__factory="rocksdb", **{key: value})
    with pytest.raises(ConfigError) as info:
        JobConfig(Config(raw))
    message = str(info.value)
    assert "systems.other.samza.factory is required: system 'other' is used but not defined" in message
    assert f"{key}={value}" in message


def test_missing_bootstrap_servers_is_named() -> None:
    raw = job_dict()
    del raw["systems.kafka.bootstrap.servers"]
    with pytest.raises(ConfigError, match=r"systems\.kafka\.bootstrap\.servers is required"):
        JobConfig(Config(raw))


def test_duplicate_input_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"task\.inputs lists a stream twice"):
        JobConfig(Config(job_dict(task__inputs="kafka.words, kafka.words")))


@pytest.mark.parametrize("text", ["words", ".words", "kafka.", " "])
def test_malformed_system_stream_is_named(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_stream(text, "task.inputs")
    assert "task.inputs" in str(info.value)
    assert "<system>.<stream>" in str(info.value)


@pytest.mark.parametrize(("key", "value"), [("task.inputs", "words"), ("task.outputs", "out")])
def test_job_config_malformed_stream_lists_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        JobConfig(Config({**job_dict(), key: value}))
    assert key in str(info.value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("key", ["job.name", "task.class", "task.inputs"])
def test_job_config_required_keys(key: str) -> None:
    raw = job_dict()
    del raw[key]
    with pytest.raises(ConfigError, match=rf"{key} is required"):
        JobConfig(Config(raw))


def test_parse_stream_keeps_dots_in_the_stream() -> None:
    assert parse_stream(" kafka.a.b.c ", "k") == SystemStream("kafka", "a.b.c")


# --- samsa config keys --------------------------------------------------------------------------------------

# CONFIG.md's key patterns; `<librdkafka key>` and `<key>` tails are printed as `*`.
CONFIG_MD_PATTERNS = [
    "job.name",
    "job.id",
    "task.class",
    "task.inputs",
    "task.broadcast.inputs",
    "task.outputs",
    "job.container.count",
    "task.commit.ms",
    "task.window.ms",
    "task.commit.max.delay.ms",
    "task.commit.timeout.ms",
    "task.deserialization.error.policy",
    "job.processing.guarantee",
    "task.eos.buffer.max.bytes",
    "task.eos.barrier.timeout.ms",
    "job.logged.store.base.dir",
    "job.non-logged.store.base.dir",
    "job.deploy",
    "deploy.spark.master",
    "deploy.spark.conf.*",
    "deploy.spark.max.restarts",
    "deploy.spark.heartbeat.timeout.ms",
    "metrics.prometheus.port",
    "systems.<sys>.samza.factory",
    "systems.<sys>.bootstrap.servers",
    "systems.<sys>.consumer.*",
    "systems.<sys>.producer.*",
    "systems.<sys>.samza.key.serde",
    "systems.<sys>.samza.msg.serde",
    "systems.<sys>.streams.<stream>.samza.key.serde",
    "systems.<sys>.streams.<stream>.samza.msg.serde",
    "systems.<sys>.streams.<stream>.samza.bootstrap",
    "systems.<sys>.streams.<stream>.samza.reset.offset",
    "systems.<sys>.streams.<stream>.samza.offset.default",
    "systems.<sys>.streams.<stream>.samza.intermediate",
    "serializers.registry.<name>.class",
    "stores.<s>.factory",
    "stores.<s>.key.serde",
    "stores.<s>.msg.serde",
    "stores.<s>.changelog",
    "stores.backup.factories",
    "stores.<s>.backup.factories",
    "stores.restore.factories",
    "stores.<s>.restore.factories",
    "blobstore.local.dir",
    "blobstore.s3.bucket",
    "blobstore.s3.prefix",
    "blobstore.s3.endpoint.url",
    "blobstore.s3.region",
    "stores.<s>.adstore.input",
    "stores.<s>.adstore.key.value.extractor.factory",
    "stores.adstore.manager.factory",
    "stores.<s>.adstore.max.staleness.ms",
]


@pytest.fixture
def config_keys_output(capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[str, str]]:
    """`samsa config keys` parsed into pattern -> (rest of the header line, doc line)."""
    assert main(["config", "keys"]) == 0
    lines = capsys.readouterr().out.splitlines()
    entries: dict[str, tuple[str, str]] = {}
    for header, doc in itertools.pairwise(lines):
        if header and not header.startswith(" "):
            pattern, _, rest = header.partition("  ")
            entries[pattern] = (rest, doc)
    return entries


def test_config_keys_lists_every_config_md_key_with_its_doc(
    config_keys_output: dict[str, tuple[str, str]],
) -> None:
    missing = [p for p in CONFIG_MD_PATTERNS if p not in config_keys_output]
    assert missing == []
    for pattern in CONFIG_MD_PATTERNS:
        header, doc = config_keys_output[pattern]
        assert header.startswith("<"), pattern  # the type
        assert doc.startswith("    ") and len(doc.strip()) > 5, pattern


@pytest.mark.parametrize(
    ("pattern", "default"),
    [
        ("job.id", "1"),
        ("job.container.count", "1"),
        ("task.commit.ms", "60000"),
        ("task.window.ms", "-1"),
        ("task.deserialization.error.policy", "fail"),
        ("job.processing.guarantee", "at_least_once"),
        ("job.logged.store.base.dir", "./state"),
        ("job.non-logged.store.base.dir", "./state"),
        ("job.deploy", "local"),
        ("systems.<sys>.samza.key.serde", "bytes"),
        ("systems.<sys>.samza.msg.serde", "bytes"),
        ("systems.<sys>.streams.<stream>.samza.bootstrap", "false"),
        ("systems.<sys>.streams.<stream>.samza.reset.offset", "false"),
        ("stores.<s>.key.serde", "bytes"),
        ("stores.<s>.msg.serde", "bytes"),
    ],
)
def test_config_keys_shows_documented_defaults(
    config_keys_output: dict[str, tuple[str, str]], pattern: str, default: str
) -> None:
    assert f"[default: {default}]" in config_keys_output[pattern][0]


def test_config_keys_marks_keys_not_supported_yet(config_keys_output: dict[str, tuple[str, str]]) -> None:
    assert "not supported yet" not in config_keys_output["task.eos.buffer.max.bytes"][0]
    assert "not supported yet" not in config_keys_output["stores.adstore.manager.factory"][0]
    assert "not supported yet" not in config_keys_output["blobstore.s3.bucket"][0]
    assert "not supported yet" not in config_keys_output["task.commit.ms"][0]
    assert "enum: fail|skip|dlq" in config_keys_output["task.deserialization.error.policy"][0]


def test_samza_system_factory_class_names_are_the_built_in_systems() -> None:
    raw = job_dict(**{"systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory"})
    assert JobConfig(Config(raw)).systems["kafka"].factory == "kafka"
    inmemory = "org.apache.samza.system.inmemory.InMemorySystemFactory"
    raw = job_dict(**{"systems.kafka.samza.factory": inmemory, "systems.kafka.bootstrap.servers": ""})
    assert JobConfig(Config(raw)).systems["kafka"].factory == "inmemory"
    raw = job_dict(**{"systems.kafka.samza.factory": "my.module:MySystemFactory"})
    with pytest.raises(ConfigError, match=r"systems\.kafka\.samza\.factory=my\.module:MySystemFactory"):
        JobConfig(Config(raw))


def test_an_inmemory_system_defaults_its_url_to_its_name_and_takes_only_inmemory_urls() -> None:
    raw = job_dict(**{"systems.kafka.samza.factory": "inmemory", "systems.kafka.bootstrap.servers": ""})
    system = JobConfig(Config(raw)).systems["kafka"]
    assert (system.bootstrap_servers, system.kafka_clients) == ("inmemory://kafka", True)
    raw["systems.kafka.bootstrap.servers"] = "inmemory:///tmp/shared"
    assert JobConfig(Config(raw)).systems["kafka"].bootstrap_servers == "inmemory:///tmp/shared"
    raw["systems.kafka.bootstrap.servers"] = "localhost:9092"
    with pytest.raises(ConfigError, match=r"systems\.kafka\.bootstrap\.servers=localhost:9092.*inmemory://"):
        JobConfig(Config(raw))
