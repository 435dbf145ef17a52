"""The Kafka changelog state backend: compacted changelog topics, offset markers, transactional restore."""

from samsa.stores.changelog.actions import LocalDir, RestoreInputs, StoreActions, store_actions
from samsa.stores.changelog.admin import ChangelogAdmin, check_unique_changelogs
from samsa.stores.changelog.backup import ChangelogBackupManager
from samsa.stores.changelog.exceptions import (
    ChangelogError,
    ChangelogMarkerError,
    ChangelogRestoreError,
    RestoreInterrupted,
)
from samsa.stores.changelog.factory import ChangelogBackendFactory
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.changelog.restore import ChangelogRestoreManager
from samsa.stores.changelog.settings import ChangelogSettings

__all__ = [
    "ChangelogAdmin",
    "ChangelogBackendFactory",
    "ChangelogBackupManager",
    "ChangelogError",
    "ChangelogMarker",
    "ChangelogMarkerError",
    "ChangelogRestoreError",
    "ChangelogRestoreManager",
    "ChangelogSettings",
    "LocalDir",
    "RestoreInputs",
    "RestoreInterrupted",
    "StoreActions",
    "check_unique_changelogs",
    "store_actions",
]
