"""DynamoDB primitives: the attribute codec, consistent reads, TransactWriteItems with named placeholders, cursors."""
