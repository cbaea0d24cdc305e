"""``world.events``: writes go to the EventWriter, reads to the EventReader."""

from __future__ import annotations

from .event_reader import EventReader
from .event_writer import EventWriter


class EventsAPI:
    def __init__(self, writer: EventWriter, reader: EventReader) -> None:
        self.create = writer.create
        self.create_batch = writer.create_batch
        self.list = reader.list
        self.list_by_correlation_id = reader.list_by_correlation_id
