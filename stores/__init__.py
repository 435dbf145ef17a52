"""Key-value stores: the store API, RocksDB and in-memory engines, and the layers stacked on them."""

from samsa.stores.api import KeyValueSnapshot, KeyValueStore
from samsa.stores.exceptions import StoreClosedError, StoreConfigError, StoreError, StoreNotFoundError
from samsa.stores.factory import StoreSpec, open_engine, store_specs
from samsa.stores.serialized import SerializedStore

__all__ = [
    "KeyValueSnapshot",
    "KeyValueStore",
    "SerializedStore",
    "StoreClosedError",
    "StoreConfigError",
    "StoreError",
    "StoreNotFoundError",
    "StoreSpec",
    "open_engine",
    "store_specs",
]
