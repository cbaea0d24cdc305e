"""The workflow runtime: running workflows and steps on a World, with replay from the event log."""
