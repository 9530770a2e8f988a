"""The reference chat app: a turn's stream over server-sent events, and a page that renders it
(docs/streaming.md)."""
