"""The rulebook: per-decision rules both Worlds apply, as pure functions over a typed view of state."""
