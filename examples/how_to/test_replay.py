# --8<-- [start:test]
import patched_checkout  # noqa: F401  (registers the workflows the histories name)

from awsworld.client.replay import load_export, replay_events


def test_new_code_replays_recorded_runs() -> None:
    for events in load_export("histories/checkout.jsonl"):  # written by `awsworld export RUN -o ...`
        result = replay_events(events)
        assert result.ok, result.describe()
# --8<-- [end:test]
