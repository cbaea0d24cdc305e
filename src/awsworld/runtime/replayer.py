"""The old path of ``awsworld.client.replay`` (the README's replay test once imported it from here): the same names."""

from ..client.replay import ReplayResult, export_lines, load_export, read_run, replay_events, replay_run

__all__ = ["ReplayResult", "export_lines", "load_export", "read_run", "replay_events", "replay_run"]
