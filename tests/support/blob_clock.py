"""A settable clock for the blob-store tests: TTLs expire when a test moves `now`."""


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now
