"""The `serializers.registry.*` config keys the serde package reads, each with a one-line doc."""

PREFIX = "serializers.registry."

# Options per built-in serde, as `serializers.registry.<name>.<option>`; other built-ins take none.
STRING_OPTIONS: dict[str, str] = {
    "encoding": "string serde: text encoding, a Python codec name (default utf-8)",
}
AVRO_OPTIONS: dict[str, str] = {
    "schema": "avro serde: writer schema as inline JSON",
    "schema.file": "avro serde: path of a .avsc file holding the writer schema (instead of .schema)",
    "reader.schema": "avro serde: reader schema as inline JSON, to resolve data written with another schema",
    "reader.schema.file": "avro serde: path of a .avsc file holding the reader schema",
    "schema.registry.url": "avro serde: Confluent Schema Registry URL(s), comma-separated; turns on the "
    "Confluent wire format (magic byte 0, 4-byte schema id) with subject <topic>-key / <topic>-value",
    "basic.auth.user.info": "avro serde: 'user:password' for HTTP basic auth to the schema registry",
    "auto.register.schemas": "avro serde: true (default) registers the writer schema under the subject; "
    "false only looks it up and fails if absent",
}
OPTIONS_BY_ALIAS: dict[str, dict[str, str]] = {"string": STRING_OPTIONS, "avro": AVRO_OPTIONS}

SERDE_CONFIG_KEYS: dict[str, str] = {
    f"{PREFIX}<name>.class": "serde of <name>: a built-in (bytes, string, json, integer, long, avro) or a "
    "factory path module:attr / module.attr; built-in names need no entry",
    **{
        f"{PREFIX}<name>.{option}": doc
        for options in OPTIONS_BY_ALIAS.values()
        for option, doc in options.items()
    },
}


def serde_key(name: str, option: str) -> str:
    """The full config key of `option` for the serde called `name`."""
    return f"{PREFIX}{name}.{option}"
