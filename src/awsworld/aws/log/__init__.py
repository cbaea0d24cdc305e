"""The event log: writes (plans, transitions, blocks, group commit), reads, and the runs/steps/hooks views."""
