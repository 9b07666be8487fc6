"""Where the store keeps its bytes: one interface (`ObjectStore`), a folder or an S3-compatible object store."""
