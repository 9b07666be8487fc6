"""Jobs: the typed, versioned records of models and clusterings (`records`, `clusterings`), one
registry per kind (`registry.JobRegistry`, `models.ModelRegistry`), their checkpoints, and model
archives (export and import)."""
