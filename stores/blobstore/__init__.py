"""The blob-store state backend: incremental snapshots of RocksDB checkpoint dirs on S3 or a directory."""
